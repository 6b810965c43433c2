//! Directives of the main and `events` contexts: daemon, workers, user,
//! pid, connections.

#[allow(unused_imports)]
use super::*;

/// This area's rows of the directive table.
pub(super) static ROWS: &[Spec] = &[
    d("daemon", MAIN, Arity::N(1), |b, d| {
        let v = flag(d)?;
        set_once(&mut b.daemon, v, d)
    }),
    d("master_process", MAIN, Arity::N(1), |_, d| {
        flag(d).map(|_| ())
    }),
    d("worker_processes", MAIN, Arity::N(1), set_worker_processes),
    d("worker_rlimit_nofile", MAIN, Arity::N(1), |b, d| {
        let n = number(d, &d.args[0])?;
        set_once(&mut b.rlimit_nofile, n, d)
    }),
    d("worker_priority", MAIN, Arity::N(1), |b, d| {
        // NGINX: any signed number, the nice value (the kernel clamps it
        // to -20..19).
        let n = d.args[0]
            .parse::<i32>()
            .map_err(|_| format!("\"{}\" directive invalid number", d.name))?;
        set_once(&mut b.worker_priority, n, d)
    }),
    d("worker_shutdown_timeout", MAIN, Arity::N(1), |b, d| {
        let t = time(d, &d.args[0])?;
        set_once(&mut b.shutdown_timeout, t, d)
    }),
    d("user", MAIN, Arity::Range(1, 2), |b, d| {
        let u = (d.args[0].clone(), d.args.get(1).cloned());
        set_once(&mut b.user, u, d)
    }),
    d("pid", MAIN, Arity::N(1), |b, d| {
        let p = b.full_path(&d.args[0]);
        set_once(&mut b.pid, p, d)
    }),
    d("timer_resolution", MAIN, Arity::N(1), |_, d| {
        time(d, &d.args[0]).map(|_| ())
    }),
    d("working_directory", MAIN, Arity::N(1), ignore),
    blk("events", MAIN, Arity::N(0), |b, d| {
        if b.events_seen {
            return Err(dup(d));
        }
        b.events_seen = true;
        b.walk_nested(d, EVENTS)
    }),
    d("worker_connections", EVENTS, Arity::N(1), |b, d| {
        let n = number(d, &d.args[0])? as usize;
        set_once(&mut b.worker_connections, n, d)
    }),
    d("accept_mutex", EVENTS, Arity::N(1), |b, d| {
        let v = flag(d)?;
        set_once(&mut b.accept_mutex, v, d)
    }),
    d("accept_mutex_delay", EVENTS, Arity::N(1), |_, d| {
        time(d, &d.args[0]).map(|_| ())
    }),
    d("multi_accept", EVENTS, Arity::N(1), |_, d| {
        flag(d).map(|_| ())
    }),
    d("use", EVENTS, Arity::N(1), |_, d| {
        match d.args[0].as_str() {
            "epoll" => Ok(()),
            other => Err(format!("invalid event type \"{other}\"")),
        }
    }),
];

fn set_worker_processes(b: &mut Build, d: &Directive) -> Res {
    let n = if d.args[0] == "auto" {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    } else {
        match d.args[0].parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => {
                return Err(format!(
                    "invalid value \"{}\" in \"{}\" directive",
                    d.args[0], d.name
                ))
            }
        }
    };
    set_once(&mut b.worker_processes, n, d)
}
