//! Certificates from mounted files (files, cert-manager and OpenShift modes), hot-reloaded by
//! polling.
//!
//! Polling the contents (not mtimes) every few seconds is simple and robust against kubelet's
//! atomic `..data` symlink swap of Secret volumes; a half-updated set (new certificate, old key)
//! fails validation and is simply retried on the next tick while the previous material stays
//! in service.

use std::path::{Path, PathBuf};
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::watch;

use crate::material::{MaterialError, TlsMaterial};

/// The files to serve from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileSource {
    /// Certificate chain, leaf first (`tls.crt`).
    pub cert: PathBuf,
    /// Private key (`tls.key`): PKCS#8, SEC1 or PKCS#1.
    pub key: PathBuf,
    /// CA bundle (`ca.crt`); when set, the chain must verify against it and it is what gets
    /// published. OpenShift's service-ca Secret has none.
    pub ca: Option<PathBuf>,
}

impl FileSource {
    /// The usual layout of a mounted `kubernetes.io/tls` Secret in `dir`: `tls.crt`, `tls.key`,
    /// and `ca.crt` if `with_ca`.
    pub fn in_dir(dir: impl AsRef<Path>, with_ca: bool) -> Self {
        let dir = dir.as_ref();
        Self {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
            ca: with_ca.then(|| dir.join("ca.crt")),
        }
    }
}

/// Failures loading the files.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// A file cannot be read.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The contents are not usable.
    #[error(transparent)]
    Material(#[from] MaterialError),
}

/// Raw file contents, compared between polls.
#[derive(Clone, PartialEq, Eq)]
struct Contents {
    cert: Vec<u8>,
    key: Vec<u8>,
    ca: Option<Vec<u8>>,
}

async fn read(path: &Path) -> Result<Vec<u8>, FilesError> {
    tokio::fs::read(path)
        .await
        .map_err(|source| FilesError::Read {
            path: path.to_owned(),
            source,
        })
}

async fn read_all(source: &FileSource) -> Result<Contents, FilesError> {
    Ok(Contents {
        cert: read(&source.cert).await?,
        key: read(&source.key).await?,
        ca: match &source.ca {
            Some(path) => Some(read(path).await?),
            None => None,
        },
    })
}

fn validate(
    source: &FileSource,
    contents: &Contents,
    now: OffsetDateTime,
) -> Result<TlsMaterial, MaterialError> {
    let cert = source.cert.display().to_string();
    let key = source.key.display().to_string();
    let ca = source.ca.as_ref().map(|p| p.display().to_string());
    TlsMaterial::from_labelled_pem(
        (&cert, &contents.cert),
        (&key, &contents.key),
        ca.as_deref().zip(contents.ca.as_deref()),
        now,
    )
}

/// Reads and validates the files once.
#[tracing::instrument(skip_all, fields(cert = %source.cert.display()))]
pub async fn load_files(source: &FileSource) -> Result<TlsMaterial, FilesError> {
    let contents = read_all(source).await?;
    Ok(validate(source, &contents, OffsetDateTime::now_utc())?)
}

/// Polls the files every `interval` (2–5 s is sensible) and sends each new valid set to `tx`.
/// Invalid or unreadable sets are logged once and skipped; what is being served stays. Returns
/// when every receiver is gone.
#[tracing::instrument(skip_all, fields(cert = %source.cert.display()))]
pub async fn watch_files(source: FileSource, tx: watch::Sender<TlsMaterial>, interval: Duration) {
    let mut last: Option<Contents> = None;
    let mut last_error: Option<String> = None;
    loop {
        tokio::select! {
            () = tx.closed() => return,
            () = tokio::time::sleep(interval) => {}
        }
        let contents = match read_all(&source).await {
            Ok(contents) => contents,
            Err(error) => {
                report_once(&mut last_error, &error);
                continue;
            }
        };
        if last.as_ref() == Some(&contents) {
            continue;
        }
        match validate(&source, &contents, OffsetDateTime::now_utc()) {
            Ok(material) => {
                last_error = None;
                let changed = tx.send_if_modified(|current| {
                    if *current == material {
                        false
                    } else {
                        *current = material;
                        true
                    }
                });
                if changed {
                    tracing::info!("loaded new TLS material from files");
                }
                last = Some(contents);
            }
            // Not remembered as `last`: a half-written set becomes valid on a later tick.
            Err(error) => report_once(&mut last_error, &error),
        }
    }
}

/// Logs `error` unless it is the one logged last (its `Debug` text holds the whole chain), so a
/// file left broken is reported once, not every poll.
fn report_once(last: &mut Option<String>, error: &(dyn std::error::Error + 'static)) {
    let key = format!("{error:?}");
    if last.as_deref() != Some(key.as_str()) {
        tracing::warn!(
            error,
            "ignoring certificate files; still serving the previous material"
        );
        *last = Some(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::KeyedCert;
    use crate::material::CaCert;
    use crate::testutil::{ca, leaf};

    fn write_set(dir: &Path, cert: &str, key: &str, ca: &str) {
        std::fs::write(dir.join("tls.crt"), cert).expect("write");
        std::fs::write(dir.join("tls.key"), key).expect("write");
        std::fs::write(dir.join("ca.crt"), ca).expect("write");
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("trustyai-certs-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        dir
    }

    /// A directory `name` holding a first valid set of files, and what it was made of.
    struct Written {
        dir: PathBuf,
        ca: KeyedCert,
        parsed_ca: CaCert,
        first: KeyedCert,
    }

    fn written(name: &str) -> Written {
        let now = OffsetDateTime::now_utc();
        let dir = temp_dir(name);
        let (ca, parsed_ca) = ca(now);
        let first = leaf(&parsed_ca, now);
        write_set(&dir, &first.cert_pem, &first.key_pem, &ca.cert_pem);
        Written {
            dir,
            ca,
            parsed_ca,
            first,
        }
    }

    /// The files of [`written`], loaded and watched every 20 ms.
    struct Watched {
        files: Written,
        rx: watch::Receiver<TlsMaterial>,
        task: tokio::task::JoinHandle<()>,
    }

    impl Watched {
        async fn start(name: &str) -> Self {
            let files = written(name);
            let source = FileSource::in_dir(&files.dir, true);
            let material = load_files(&source).await.expect("load");
            let (tx, rx) = watch::channel(material);
            let task = tokio::spawn(watch_files(source, tx, Duration::from_millis(20)));
            Self { files, rx, task }
        }

        /// Drops the receiver; the watcher must stop.
        async fn close(self) {
            drop(self.rx);
            tokio::time::timeout(Duration::from_secs(5), self.task)
                .await
                .expect("stops when receivers are gone")
                .expect("no panic");
            std::fs::remove_dir_all(&self.files.dir).ok();
        }
    }

    #[tokio::test]
    async fn a_valid_set_of_files_is_loaded() {
        let files = written("load");
        let material = load_files(&FileSource::in_dir(&files.dir, true))
            .await
            .expect("load");
        assert_eq!(material.cert_chain_pem(), files.first.cert_pem);
        std::fs::remove_dir_all(&files.dir).ok();
    }

    #[tokio::test]
    async fn garbage_never_replaces_what_is_served() {
        let watched = Watched::start("garbage").await;
        std::fs::write(watched.files.dir.join("tls.crt"), "garbage").expect("write");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!watched.rx.has_changed().expect("open"));
        watched.close().await;
    }

    #[tokio::test]
    async fn a_new_valid_set_of_files_is_reloaded() {
        let mut watched = Watched::start("reload").await;
        let files = &watched.files;
        let second = leaf(&files.parsed_ca, OffsetDateTime::now_utc());
        write_set(
            &files.dir,
            &second.cert_pem,
            &second.key_pem,
            &files.ca.cert_pem,
        );
        tokio::time::timeout(Duration::from_secs(5), watched.rx.changed())
            .await
            .expect("reloaded in time")
            .expect("open");
        assert_eq!(
            watched.rx.borrow_and_update().cert_chain_pem(),
            second.cert_pem
        );
        watched.close().await;
    }

    #[tokio::test]
    async fn the_watcher_stops_when_its_receivers_are_gone() {
        Watched::start("stop").await.close().await;
    }

    #[tokio::test]
    async fn a_missing_file_is_a_read_error_naming_it() {
        let dir = temp_dir("missing");
        let source = FileSource::in_dir(&dir, false);
        let err = load_files(&source).await.expect_err("missing");
        assert!(err.to_string().contains("tls.crt"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
