//! The ACME thread: one OS thread named `acme` running a tokio
//! current-thread runtime, started by the first configuration that has
//! an `acme_certificate` and kept for the life of the process. Each
//! certificate has a task that sleeps until the certificate is due
//! (now, when none is served; else `renewal::plan`: the issuer's ARI
//! window, or two thirds of its lifetime), obtains one, installs it and writes it
//! under the state path. A failure is logged at `error` and retried
//! after a backoff (10 s doubling to 6 h; an hour at least when the
//! issuer says `rateLimited`) while the old certificate keeps serving.
//! A reload hands over the new set ([`apply`]): tasks of certificates
//! that are gone stop, new ones start, unchanged ones go on (an order
//! in flight is not restarted).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use instant_acme::{Account, CertificateIdentifier};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::client::{self, AcmeError};
use super::slot::Installed;
use super::{renewal, state, Certificate, Issuer};
use crate::log::{ErrorLog, Level};

/// The first retry after a failure; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(10);
const MAX_BACKOFF: Duration = Duration::from_secs(6 * 3600);
/// The least wait after the issuer answered `rateLimited`.
const RATE_LIMITED: Duration = Duration::from_secs(3600);

/// What the live configuration asks for.
struct Plan {
    certs: Vec<Arc<Certificate>>,
    log: ErrorLog,
}

/// What the certificates' tasks share.
struct Shared {
    log: RwLock<ErrorLog>,
    /// Accounts by issuer settings.
    accounts: tokio::sync::Mutex<HashMap<String, Account>>,
}

impl Shared {
    fn log(&self, level: Level, msg: std::fmt::Arguments<'_>) {
        self.log
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .log(level, msg);
    }
}

static PLAN: Mutex<Option<watch::Sender<Arc<Plan>>>> = Mutex::new(None);

/// Keeps `certs` valid from now on (after a start or a reload); the
/// ACME thread starts with the first configuration that has any.
pub fn apply(certs: Vec<Arc<Certificate>>, log: &ErrorLog) {
    let plan = Arc::new(Plan {
        certs,
        log: log.clone(),
    });
    let mut g = PLAN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(tx) = &*g {
        let _ = tx.send(plan);
        return;
    }
    if plan.certs.is_empty() {
        return;
    }
    let (tx, rx) = watch::channel(plan);
    let started = std::thread::Builder::new()
        .name("acme".into())
        .spawn(move || run(rx));
    match started {
        Ok(_) => *g = Some(tx),
        Err(e) => log.log(
            Level::Alert,
            format_args!("acme: cannot start its thread ({e}); no certificate will be obtained"),
        ),
    }
}

fn run(rx: watch::Receiver<Arc<Plan>>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    match rt {
        Ok(rt) => rt.block_on(supervise(rx)),
        Err(e) => {
            let log = rx.borrow().log.clone();
            log.log(
                Level::Alert,
                format_args!("acme: cannot start its runtime ({e})"),
            );
        }
    }
}

/// Starts and stops the certificates' tasks as configurations come.
async fn supervise(mut rx: watch::Receiver<Arc<Plan>>) {
    let shared = Arc::new(Shared {
        log: RwLock::new(rx.borrow().log.clone()),
        accounts: tokio::sync::Mutex::new(HashMap::new()),
    });
    let mut tasks: HashMap<String, (String, JoinHandle<()>)> = HashMap::new();
    loop {
        let plan = rx.borrow_and_update().clone();
        *shared.log.write().unwrap_or_else(|e| e.into_inner()) = plan.log.clone();
        let wanted: HashMap<&str, &Arc<Certificate>> =
            plan.certs.iter().map(|c| (c.id.as_str(), c)).collect();
        tasks.retain(|id, (settings, task)| {
            let keep = wanted
                .get(id.as_str())
                .is_some_and(|c| settings_of(&c.issuer) == *settings);
            if !keep {
                task.abort();
            }
            keep
        });
        for c in &plan.certs {
            if !tasks.contains_key(&c.id) {
                let task = tokio::spawn(keep(Arc::clone(c), Arc::clone(&shared)));
                tasks.insert(c.id.clone(), (settings_of(&c.issuer), task));
            }
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}

/// What an account depends on: a change of any of it means another
/// account (or another way to reach it).
fn settings_of(i: &Issuer) -> String {
    format!(
        "{}|{}|{:?}|{:?}|{:?}|{:?}|{}|{:?}|{}",
        i.name,
        i.uri,
        i.challenge,
        i.contacts,
        i.account_key,
        i.state_path,
        i.accept_tos,
        i.external_account,
        // The TLS client settings are built per configuration; compare
        // what they were built from instead.
        i.tls_settings.as_str()
    )
}

/// Keeps one certificate valid, forever.
async fn keep(cert: Arc<Certificate>, shared: Arc<Shared>) {
    let names = cert.names.join(" ");
    let mut failures = 0u32;
    loop {
        let Some(replaces) = wait_until_due(&cert, &shared, &names).await else {
            continue;
        };
        match obtain(&cert, &shared, replaces).await {
            Ok(new) => {
                failures = 0;
                shared.log(
                    Level::Notice,
                    format_args!(
                        "acme: certificate for \"{names}\" issued by \"{}\", valid until {}",
                        cert.issuer.name,
                        httpdate::fmt_http_date(new.not_after)
                    ),
                );
            }
            Err(e) => {
                failures += 1;
                shared
                    .accounts
                    .lock()
                    .await
                    .remove(&settings_of(&cert.issuer));
                let wait = backoff(failures, e.rate_limited);
                shared.log(
                    Level::Error,
                    format_args!(
                        "acme: certificate for \"{names}\" from \"{}\": {e}, next attempt in {} s",
                        cert.issuer.name,
                        wait.as_secs()
                    ),
                );
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// Sleeps until `cert` is due (at once when nothing is served); `None`
/// when the plan is to be asked again first (ARI's recheck), else the
/// certificate the new order replaces, if the issuer takes that.
async fn wait_until_due(
    cert: &Certificate,
    shared: &Shared,
    names: &str,
) -> Option<Option<CertificateIdentifier<'static>>> {
    let Some(current) = cert.slot.current() else {
        return Some(None);
    };
    let account = account_for(&cert.issuer, shared).await.ok();
    let plan = renewal::plan(account.as_ref(), &current).await;
    let wait = plan
        .at
        .duration_since(SystemTime::now())
        .unwrap_or(Duration::ZERO);
    if !wait.is_zero() {
        shared.log(
            Level::Notice,
            format_args!(
                "acme: certificate for \"{names}\" is valid until {}, renewal in {} s (at {})",
                httpdate::fmt_http_date(current.not_after),
                wait.as_secs(),
                plan.source
            ),
        );
        if let Some(r) = plan.recheck.filter(|r| *r < wait) {
            tokio::time::sleep(r).await;
            return None;
        }
        tokio::time::sleep(wait).await;
    }
    Some(plan.replaces)
}

/// The wait after the `n`th failure in a row.
fn backoff(n: u32, rate_limited: bool) -> Duration {
    let d = FIRST_BACKOFF.saturating_mul(1 << n.saturating_sub(1).min(16));
    let d = d.min(MAX_BACKOFF);
    match rate_limited {
        true => d.max(RATE_LIMITED),
        false => d,
    }
}

/// One attempt: account, order, install, keep on disk.
async fn obtain(
    cert: &Arc<Certificate>,
    shared: &Shared,
    replaces: Option<CertificateIdentifier<'static>>,
) -> Result<Installed, AcmeError> {
    let account = account_for(&cert.issuer, shared).await?;
    shared.log(
        Level::Notice,
        format_args!(
            "acme: ordering a certificate for \"{}\" from \"{}\"",
            cert.names.join(" "),
            cert.issuer.name
        ),
    );
    let (chain, key) = client::issue(&account, cert, replaces).await?;
    let new = Installed::from_pem(&chain, &key).map_err(|reason| AcmeError {
        step: "certificate",
        reason,
        rate_limited: false,
    })?;
    cert.slot.install(new.clone());
    let c = Arc::clone(cert);
    let saved =
        tokio::task::spawn_blocking(move || state::save_certificate(&c, &chain, &key)).await;
    if let Ok(Err(e)) = saved {
        shared.log(
            Level::Error,
            format_args!("acme: {e}; the certificate is served but not kept"),
        );
    }
    Ok(new)
}

/// The issuer's account, registered or looked up once per settings.
async fn account_for(issuer: &Arc<Issuer>, shared: &Shared) -> Result<Account, AcmeError> {
    let key = settings_of(issuer);
    let mut accounts = shared.accounts.lock().await;
    if let Some(a) = accounts.get(&key) {
        return Ok(a.clone());
    }
    let i = Arc::clone(issuer);
    let kept = tokio::task::spawn_blocking(move || state::read_account_key(&i))
        .await
        .unwrap_or_else(|e| Err(e.to_string()))
        .map_err(|reason| AcmeError {
            step: "account key",
            reason,
            rate_limited: false,
        })?;
    let (account, new_key) = client::account(issuer, kept.as_deref()).await?;
    if let Some(pem) = new_key {
        shared.log(
            Level::Notice,
            format_args!(
                "acme: account registered with \"{}\" ({})",
                issuer.name,
                account.id()
            ),
        );
        let i = Arc::clone(issuer);
        let saved = tokio::task::spawn_blocking(move || state::save_account_key(&i, &pem)).await;
        if let Ok(Err(e)) = saved {
            shared.log(Level::Error, format_args!("acme: {e}"));
        }
    }
    accounts.insert(key, account.clone());
    Ok(account)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_six_hours_and_an_hour_after_a_rate_limit() {
        assert_eq!(backoff(1, false), Duration::from_secs(10));
        assert_eq!(backoff(2, false), Duration::from_secs(20));
        assert_eq!(backoff(4, false), Duration::from_secs(80));
        assert_eq!(backoff(40, false), MAX_BACKOFF);
        assert_eq!(backoff(1, true), RATE_LIMITED);
    }
}
