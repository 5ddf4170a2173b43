//! One way to show an error to a person: its message followed by every cause, each once.
//!
//! Error types in this workspace keep their cause out of their own message and return it from
//! `source()`, so a log line, an event note, a condition message or the CLI's last line shows
//! the chain through [`Chain`], never a bare `to_string()` that would drop the causes.

use std::error::Error;
use std::fmt;

/// Displays `error: cause: cause-of-cause`. A cause whose text the line already holds is
/// skipped, so an error from a dependency that repeats its source is still shown once.
#[derive(Clone, Copy)]
pub struct Chain<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&chain_text(self.0))
    }
}

impl fmt::Debug for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The text [`Chain`] displays, as an owned string (for event notes and condition messages).
pub fn chain_text(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("starting the server")]
    struct Outer(#[source] Middle);

    #[derive(Debug, thiserror::Error)]
    #[error("binding 127.0.0.1:1")]
    struct Middle(#[source] std::io::Error);

    #[test]
    fn every_cause_is_shown_once_in_order() {
        let error = Outer(Middle(std::io::Error::other("address in use")));
        assert_eq!(
            Chain(&error).to_string(),
            "starting the server: binding 127.0.0.1:1: address in use"
        );
    }

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        #[derive(Debug, thiserror::Error)]
        #[error("reading the file: {0}")]
        struct Repeats(#[source] std::io::Error);
        let error = Repeats(std::io::Error::other("denied"));
        assert_eq!(chain_text(&error), "reading the file: denied");
    }
}
