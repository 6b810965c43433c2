//! Graceful and fast shutdown, as one small mechanism: the master holds a
//! [`ShutdownTrigger`] per worker generation, every worker task holds a
//! [`ShutdownSignal`]. `Graceful` stops accepting and closes idle
//! connections while requests in flight finish; `Fast` drops everything.

use tokio::sync::watch;

/// The shutdown state of a worker generation, in escalating order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    /// Serving.
    Run,
    /// Stop accepting; finish requests in flight; close idle connections.
    Graceful,
    /// Close everything now.
    Fast,
}

/// The master's side.
#[derive(Debug)]
pub struct ShutdownTrigger(watch::Sender<Mode>);

/// A worker's side (cheap to clone).
#[derive(Debug, Clone)]
pub struct ShutdownSignal(watch::Receiver<Mode>);

/// A connected trigger and signal.
pub fn channel() -> (ShutdownTrigger, ShutdownSignal) {
    let (tx, rx) = watch::channel(Mode::Run);
    (ShutdownTrigger(tx), ShutdownSignal(rx))
}

impl ShutdownTrigger {
    /// Moves to `mode` (never back to a milder one).
    pub fn set(&self, mode: Mode) {
        self.0.send_if_modified(|m| {
            if mode > *m {
                *m = mode;
                true
            } else {
                false
            }
        });
    }

    /// Another signal for the same trigger.
    pub fn subscribe(&self) -> ShutdownSignal {
        ShutdownSignal(self.0.subscribe())
    }
}

impl ShutdownSignal {
    /// The current mode.
    pub fn mode(&self) -> Mode {
        *self.0.borrow()
    }

    /// Resolves once the mode is at least `mode` (or the trigger is gone).
    pub async fn wait_for(&mut self, mode: Mode) {
        let _ = self.0.wait_for(|m| *m >= mode).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escalates_only() {
        let (t, s) = channel();
        assert_eq!(s.mode(), Mode::Run);
        t.set(Mode::Fast);
        t.set(Mode::Graceful);
        assert_eq!(s.mode(), Mode::Fast);
    }
}
