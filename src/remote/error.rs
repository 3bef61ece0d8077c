//! What can go wrong reaching a remote source ([`RemoteError`]), and how ssh's own messages
//! are read into it ([`classify`]).

use std::path::PathBuf;

/// Why a remote source could not be mirrored. Every variant names the host (as
/// `[user@]host[:port]`) and, where it is about a file, the remote path.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// No connection could be made: the name does not resolve, nothing listens, a timeout.
    #[error("{host}: cannot connect: {reason}")]
    Unreachable {
        /// `[user@]host[:port]`.
        host: String,
        /// ssh's message.
        reason: String,
    },
    /// The server refused every key or method ssh offered (dumpview never lets ssh ask for a
    /// password: BatchMode is always on).
    #[error(
        "{host}: authentication failed: {reason} (dumpview runs ssh with BatchMode=yes, so it needs a key or agent that logs in without a prompt; check with `{by_hand} -o BatchMode=yes true`)"
    )]
    AuthFailed {
        /// `[user@]host[:port]`.
        host: String,
        /// ssh's message.
        reason: String,
        /// The ssh command line that reaches the host by hand.
        by_hand: String,
    },
    /// The host's key is not in known_hosts, and ssh may not ask (BatchMode).
    #[error(
        "{host}: the host key is not known ({reason}); add it to known_hosts (connect once with `{by_hand}` and check the fingerprint it shows), or pass --accept-new-host-key to trust a host seen for the first time"
    )]
    UnknownHostKey {
        /// `[user@]host[:port]`.
        host: String,
        /// ssh's message.
        reason: String,
        /// The ssh command line that reaches the host by hand.
        by_hand: String,
    },
    /// The host's key differs from the one in known_hosts: refused, as ssh refuses it.
    #[error(
        "{host}: the host key has CHANGED since it was recorded in known_hosts ({reason}); if the change is expected, remove the old key with `ssh-keygen -R`"
    )]
    HostKeyChanged {
        /// `[user@]host[:port]`.
        host: String,
        /// ssh's message.
        reason: String,
    },
    /// The remote path does not exist.
    #[error("{host}: {path}: no such file or directory on the remote host")]
    PathMissing {
        /// `[user@]host[:port]`.
        host: String,
        /// The remote path.
        path: String,
    },
    /// The remote path exists but cannot be read (permissions, not a file or directory).
    #[error("{host}: {path}: cannot read it: {reason}")]
    PathUnreadable {
        /// `[user@]host[:port]`.
        host: String,
        /// The remote path.
        path: String,
        /// What the remote side said.
        reason: String,
    },
    /// The listing holds no dump file: an error, never "no findings".
    #[error(
        "{host}: {path}: no dump file found there or below it (looked for {names}); is this the dump directory?"
    )]
    ListingEmpty {
        /// `[user@]host[:port]`.
        host: String,
        /// The remote path.
        path: String,
        /// The file names looked for.
        names: String,
    },
    /// The listing could not be made or read (the remote `find` failed, its output is not
    /// what dumpview asked for).
    #[error("{host}: {path}: cannot list it: {reason}")]
    ListingUnreadable {
        /// `[user@]host[:port]`.
        host: String,
        /// The remote path.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// An established connection broke (the server went away, a timeout); the caller retries
    /// with [`crate::remote::Backoff`].
    #[error("{host}: connection lost: {reason}")]
    ConnectionLost {
        /// `[user@]host[:port]`.
        host: String,
        /// What ssh said, or which command stopped answering.
        reason: String,
    },
    /// The ssh program could not be run, or failed in a way none of the above describes.
    #[error("{host}: ssh failed: {reason}")]
    Ssh {
        /// `[user@]host[:port]`.
        host: String,
        /// What went wrong.
        reason: String,
    },
    /// The local cache could not be written or read.
    #[error("{}: local cache: {source}", path.display())]
    Cache {
        /// The local file or directory.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// [`crate::remote::Mirror::fetch`] was asked for a file outside the mirror.
    #[error("{}: not inside the mirror of {source_text} ({})", path.display(), root.display())]
    NotInMirror {
        /// The local path asked for.
        path: PathBuf,
        /// The mirror's root.
        root: PathBuf,
        /// The source as written.
        source_text: String,
    },
}

impl RemoteError {
    /// Whether retrying later may help (a lost or unreachable connection), as opposed to an
    /// answer that retrying will not change (a refused key, a missing path).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            RemoteError::ConnectionLost { .. } | RemoteError::Unreachable { .. }
        )
    }

    /// The same error as seen on an established session: a connection that can no longer
    /// be made is a lost connection.
    pub(crate) fn in_session(self) -> RemoteError {
        match self {
            RemoteError::Unreachable { host, reason } => {
                RemoteError::ConnectionLost { host, reason }
            }
            other => other,
        }
    }
}

/// Reads ssh's stderr, after it exited with 255 (its own failure, not the remote command's),
/// into an error for `host`, which `by_hand` (an ssh command line) reaches.
pub(crate) fn classify(host: &str, by_hand: &str, stderr: &str) -> RemoteError {
    let reason = ssh_message(stderr);
    let has = |needle: &str| stderr.contains(needle);
    let host = host.to_string();
    if has("REMOTE HOST IDENTIFICATION HAS CHANGED") || has("Host key for") && has("has changed") {
        RemoteError::HostKeyChanged { host, reason }
    } else if has("Host key verification failed")
        || has("host key is known for")
        || has("No matching host key")
    {
        RemoteError::UnknownHostKey {
            host,
            reason,
            by_hand: by_hand.to_string(),
        }
    } else if has("Permission denied (") || has("Too many authentication failures") {
        RemoteError::AuthFailed {
            host,
            reason,
            by_hand: by_hand.to_string(),
        }
    } else if has("Connection closed by")
        || has("Connection reset")
        || has("Broken pipe")
        || has("closed by remote host")
        || has("not responding")
        || has("read from master failed")
        || has("Connection to ") && has(" closed")
        || has("client_loop:")
    {
        RemoteError::ConnectionLost { host, reason }
    } else if has("Could not resolve hostname")
        || has("Connection refused")
        || has("timed out")
        || has("No route to host")
        || has("Network is unreachable")
        || has("Name or service not known")
        || has("kex_exchange_identification")
    {
        RemoteError::Unreachable { host, reason }
    } else {
        RemoteError::Ssh { host, reason }
    }
}

/// ssh's stderr made short: its last meaningful lines, without the banners and warnings
/// that precede the real message.
pub(crate) fn ssh_message(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .filter(|l| !l.starts_with("Warning: Permanently added"))
        .filter(|l| !l.starts_with("@@@"))
        .collect();
    match lines.len() {
        0 => "ssh exited with status 255 and said nothing".to_string(),
        n => lines[n.saturating_sub(3)..].join("; "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_messages_map_to_their_errors() {
        let kind = |stderr: &str| match classify("h", "ssh h", stderr) {
            RemoteError::Unreachable { .. } => "unreachable",
            RemoteError::AuthFailed { .. } => "auth",
            RemoteError::UnknownHostKey { .. } => "unknown key",
            RemoteError::HostKeyChanged { .. } => "changed key",
            RemoteError::ConnectionLost { .. } => "lost",
            _ => "other",
        };
        assert_eq!(
            kind("ssh: connect to host 127.0.0.1 port 1: Connection refused"),
            "unreachable"
        );
        assert_eq!(
            kind("ssh: Could not resolve hostname nohost: Name or service not known"),
            "unreachable"
        );
        assert_eq!(
            kind("root@127.0.0.1: Permission denied (publickey)."),
            "auth"
        );
        assert_eq!(
            kind(
                "No ED25519 host key is known for [127.0.0.1]:4022 and you have requested strict checking.\nHost key verification failed."
            ),
            "unknown key"
        );
        assert_eq!(
            kind(
                "@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\nHost key verification failed."
            ),
            "changed key"
        );
        assert_eq!(
            kind("Connection to 127.0.0.1 closed by remote host."),
            "lost"
        );
        assert_eq!(
            kind("mux_client_request_session: read from master failed: Broken pipe"),
            "lost"
        );
        assert_eq!(kind("something else"), "other");
        let error = classify(
            "alice@gpu1",
            "ssh -l alice gpu1",
            "Host key verification failed.",
        )
        .to_string();
        assert!(
            error.starts_with("alice@gpu1: the host key is not known"),
            "{error}"
        );
        assert!(
            error.contains("--accept-new-host-key") && error.contains("known_hosts"),
            "{error}"
        );
        assert!(error.contains("`ssh -l alice gpu1`"), "{error}");
    }
}
