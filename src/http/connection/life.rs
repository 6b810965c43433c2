//! A connection's task in two phases that never coexist: accepting (the
//! PROXY header, the TLS handshake: what `serve` does before the first
//! request) and serving requests (`Connection::run`). The task's future
//! is one or the other, so its size is the larger of the two.
//!
//! Written as a future of its own because an `async fn` cannot be: its
//! arguments (the socket, `ConnInfo`, the worker) and any local that is
//! moved into the next future keep their slots in the coroutine for its
//! whole life, so a plain `serve` awaiting `run` at its end was `run`
//! plus 384 bytes — paid by every idle keep-alive connection
//! (`tests/idle_memory.rs`).

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

pin_project_lite::pin_project! {
    /// `accept`, then `start` on what it gave (nothing: the connection
    /// ended while accepting).
    #[project = LifeProj]
    pub(super) enum Life<A, F, R> {
        /// Before the first request.
        Accept { #[pin] accept: A, start: Option<F> },
        /// Serving requests.
        Run { #[pin] run: R },
    }
}

impl<A, F, R> Life<A, F, R> {
    /// A connection that runs `accept`, then `start(accepted)`.
    pub(super) fn new(accept: A, start: F) -> Self {
        Life::Accept {
            accept,
            start: Some(start),
        }
    }
}

impl<A, C, F, R> Future for Life<A, F, R>
where
    A: Future<Output = Option<C>>,
    F: FnOnce(C) -> R,
    R: Future<Output = ()>,
{
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            match self.as_mut().project() {
                LifeProj::Accept { accept, start } => {
                    let Some(accepted) = ready!(accept.poll(cx)) else {
                        return Poll::Ready(());
                    };
                    let start = start.take().expect("a connection starts once");
                    // Drops the accept phase's future in place, then
                    // begins the next one (not yet polled).
                    self.set(Life::Run {
                        run: start(accepted),
                    });
                }
                LifeProj::Run { run } => return run.poll(cx),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_run_phase_gets_what_the_accept_phase_gave() {
        let got = std::rc::Rc::new(std::cell::Cell::new(0));
        let g = got.clone();
        Life::new(async { Some(41) }, move |n: i32| async move {
            tokio::task::yield_now().await;
            g.set(n + 1)
        })
        .await;
        assert_eq!(got.get(), 42);
    }

    #[tokio::test]
    async fn a_connection_that_ends_while_accepting_never_runs() {
        let ran = std::rc::Rc::new(std::cell::Cell::new(false));
        let r = ran.clone();
        Life::new(async { None::<i32> }, move |_| async move { r.set(true) }).await;
        assert!(!ran.get());
    }
}
