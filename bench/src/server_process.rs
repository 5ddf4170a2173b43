//! A server under test in a process of its own (`bench-server`, `go-conversion`): it prints
//! `PORT <port>` on stdout once it listens and stops when its stdin closes.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStderr, Command, Stdio};

use anyhow::{Context, Result};

/// A running server; dropping it closes its stdin and waits for it to exit.
pub struct ServerProcess {
    child: Child,
    port: u16,
}

impl ServerProcess {
    /// Spawns `command` (its stderr as the caller set it) and waits for its port.
    pub fn start(mut command: Command, what: &str) -> Result<ServerProcess> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {what}"))?;
        let stdout = child.stdout.take().context("server stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .with_context(|| format!("{what} did not print its port: {line:?}"))?
            .parse()
            .with_context(|| format!("{what}'s port"))?;
        Ok(ServerProcess { child, port })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the server at once, without its graceful drain.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
    }

    /// The server's stderr, when the command piped it; `None` the second time.
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr.take()
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}
