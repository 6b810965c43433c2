//! Process and threads: the master (signals, reload, pid file, daemon),
//! worker threads with their event loops, listening sockets and the
//! privilege drop. The shutdown signal they share is `util::shutdown`.

pub mod code_lock;
pub mod fd_table;
pub mod listen;
pub mod loop_lag;
pub mod loop_watch;
pub mod master;
pub mod notices;
pub mod privileges;
pub mod quic_steer;
pub mod upgrade;
pub mod worker;
