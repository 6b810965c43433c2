//! Process and threads: the master (signals, reload, pid file, daemon),
//! worker threads with their event loops, listening sockets, privilege
//! drop and the shutdown mechanism.

pub mod listen;
pub mod master;
pub mod privileges;
pub mod shutdown;
pub mod worker;
