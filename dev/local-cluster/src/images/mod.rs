//! Container images made here, without a registry: a root folder becomes a one-layer OCI image
//! archive (a layer tar, a config, a manifest, `index.json` naming the image) that containerd
//! imports. Archives are cached by content in the versioned cache, under their content's tag.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use ring::digest::{Context, SHA256, digest};
use serde_json::{Value, json};

use crate::command::run;

pub mod debian;
pub mod dockerfile;
pub mod kube_rbac_proxy;
pub mod mariadb;
pub mod operator;
pub mod trustyai_service;

/// What runs from the image: its user, entrypoint, command, environment, ports and labels.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageConfig {
    pub user: Option<String>,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    pub env: Vec<String>,
    pub working_dir: Option<String>,
    /// `8443/tcp`, ...
    pub exposed_ports: Vec<String>,
    pub labels: BTreeMap<String, String>,
}

impl ImageConfig {
    fn to_json(&self) -> Value {
        let ports: serde_json::Map<String, Value> = self
            .exposed_ports
            .iter()
            .map(|p| (p.clone(), json!({})))
            .collect();
        let mut config = json!({
            "Entrypoint": self.entrypoint,
            "Cmd": self.cmd,
            "Env": self.env,
            "ExposedPorts": ports,
            "Labels": self.labels,
        });
        if let Some(user) = &self.user {
            config["User"] = json!(user);
        }
        if let Some(dir) = &self.working_dir {
            config["WorkingDir"] = json!(dir);
        }
        config
    }

    /// The configuration an image archive holds, read back from it.
    pub fn from_image_json(config: &Value) -> ImageConfig {
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let c = &config["config"];
        ImageConfig {
            user: c["User"].as_str().map(str::to_owned),
            entrypoint: strings(&c["Entrypoint"]),
            cmd: strings(&c["Cmd"]),
            env: strings(&c["Env"]),
            working_dir: c["WorkingDir"].as_str().map(str::to_owned),
            exposed_ports: c["ExposedPorts"]
                .as_object()
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default(),
            labels: c["Labels"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

/// An image archive in the cache and the reference containerd knows it by.
#[derive(Debug, Clone)]
pub struct Image {
    /// `localhost/<name>:<content tag>`: a name no public registry serves, so a missing import
    /// can never be mistaken for a pull.
    pub reference: String,
    pub archive: PathBuf,
}

impl Image {
    /// The repository part of the reference (for a chart's `image.repository`).
    pub fn repository(&self) -> &str {
        self.reference
            .rsplit_once(':')
            .map_or(self.reference.as_str(), |(r, _)| r)
    }

    /// The tag part of the reference.
    pub fn tag(&self) -> &str {
        self.reference.rsplit_once(':').map_or("", |(_, t)| t)
    }
}

/// A folder name in the cache for one build's scratch work, unique to this call (builds of
/// several threads and processes share the cache).
pub fn scratch_dir(prefix: &str) -> Result<PathBuf, String> {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    Ok(cache_dir()?.join(format!(".{prefix}-{}-{n}", std::process::id())))
}

/// Where built images are kept: beside the control-plane binaries' folder.
pub fn cache_dir() -> Result<PathBuf, String> {
    let bin = crate::bin_dir()?;
    let dir = bin
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| format!("{} has no cache folder above it", bin.display()))?
        .join("images");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    Ok(dir)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex(digest(&SHA256, bytes).as_ref())
}

/// The SHA-256 of a file, read in pieces (a layer can be most of a gigabyte).
fn file_sha256_hex(path: &Path) -> Result<(String, u64), String> {
    use std::io::Read;
    let mut file =
        std::fs::File::open(path).map_err(|e| format!("opening {}: {e}", path.display()))?;
    let mut context = Context::new(&SHA256);
    let mut buffer = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = file
            .read(&mut buffer)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        size += n as u64;
        context.update(&buffer[..n]);
    }
    Ok((hex(context.finish().as_ref()), size))
}

/// A digest of everything a build reads: named byte strings and whole folders (each file's path
/// relative to its folder, its mode's executable bit and its content, in path order).
#[derive(Default)]
pub struct InputDigest {
    parts: Vec<(String, Vec<u8>)>,
}

impl InputDigest {
    pub fn bytes(mut self, name: &str, bytes: &[u8]) -> Self {
        self.parts.push((name.to_owned(), bytes.to_vec()));
        self
    }

    pub fn file(self, name: &str, path: &Path) -> Result<Self, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        Ok(self.bytes(name, &bytes))
    }

    pub fn folder(mut self, name: &str, root: &Path) -> Result<Self, String> {
        use std::os::unix::fs::PermissionsExt;
        let mut files = Vec::new();
        let mut pending = vec![root.to_path_buf()];
        while let Some(dir) = pending.pop() {
            let entries =
                std::fs::read_dir(&dir).map_err(|e| format!("listing {}: {e}", dir.display()))?;
            for entry in entries {
                let path = entry.map_err(|e| e.to_string())?.path();
                if path.is_dir() {
                    pending.push(path);
                } else {
                    files.push(path);
                }
            }
        }
        files.sort();
        for path in files {
            let relative = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .display()
                .to_string();
            let executable = std::fs::metadata(&path)
                .map(|m| m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false);
            let bytes =
                std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
            self.parts
                .push((format!("{name}/{relative} x={executable}"), bytes));
        }
        Ok(self)
    }

    /// Sixteen hex digits of the digest.
    pub fn key(&self) -> String {
        let mut context = Context::new(&SHA256);
        for (name, bytes) in &self.parts {
            context.update(&(name.len() as u64).to_le_bytes());
            context.update(name.as_bytes());
            context.update(&(bytes.len() as u64).to_le_bytes());
            context.update(bytes);
        }
        hex(&context.finish().as_ref()[..8])
    }
}

/// The image `name` built from inputs whose digest is `key`: the cached one, or the one `make`
/// builds (remembered under the key). One build per name at a time, across processes too.
pub fn cached(
    name: &str,
    key: &str,
    make: impl FnOnce() -> Result<Image, String>,
) -> Result<Image, String> {
    let cache = cache_dir()?;
    let lock_path = cache.join(format!(".{name}.lock"));
    let lock = std::fs::File::create(&lock_path)
        .map_err(|e| format!("creating {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("locking {}: {e}", lock_path.display()))?;
    let note = cache.join(format!("{name}.{key}.ref"));
    if let Ok(reference) = std::fs::read_to_string(&note) {
        let reference = reference.trim();
        let tag = reference.rsplit_once(':').map_or("", |(_, t)| t);
        let archive = cache.join(format!("{name}-{tag}.tar"));
        if archive.exists() {
            mark_used(&archive);
            return Ok(Image {
                reference: reference.to_owned(),
                archive,
            });
        }
    }
    let started = std::time::Instant::now();
    let image = make()?;
    eprintln!(
        "image {name}: built {} in {:.1}s",
        image.reference,
        started.elapsed().as_secs_f64()
    );
    std::fs::write(&note, &image.reference)
        .map_err(|e| format!("writing {}: {e}", note.display()))?;
    Ok(image)
}

/// Makes the one-layer image of `rootfs` with `config`, named `localhost/<name>:<tag>` where the
/// tag is the content's digest; an archive already cached under that tag is reused.
pub fn build(name: &str, rootfs: &Path, config: &ImageConfig) -> Result<Image, String> {
    let cache = cache_dir()?;
    let work = scratch_dir(&format!("build-{name}"))?;
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("blobs/sha256")).map_err(|e| e.to_string())?;
    let result = build_in(name, rootfs, config, &cache, &work);
    let _ = std::fs::remove_dir_all(&work);
    if let Ok(image) = &result {
        mark_used(&image.archive);
        prune(&cache, name, ARCHIVES_KEPT);
    }
    result
}

/// Sets `archive`'s modification time to now: pruning keeps the archives used last.
fn mark_used(archive: &Path) {
    let _ = std::fs::File::options()
        .append(true)
        .open(archive)
        .and_then(|f| f.set_modified(std::time::SystemTime::now()));
}

/// How many archives of one image name the cache keeps: the most recently used ones (several
/// checkouts of the project may run at once, each with its own version of an image).
pub const ARCHIVES_KEPT: usize = 3;

/// Removes the archives `<name>-<tag>.tar` of `cache` but the `keep` most recently used
/// (modified) ones. An archive another run still imports is kept by that run's own use.
pub fn prune(cache: &Path, name: &str, keep: usize) {
    let prefix = format!("{name}-");
    let Ok(entries) = std::fs::read_dir(cache) else {
        return;
    };
    let mut archives: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            let file = e.file_name();
            let file = file.to_string_lossy();
            file.strip_prefix(&prefix)
                .and_then(|rest| rest.strip_suffix(".tar"))
                // The tag is hex: another image whose name starts with this one's differs.
                .is_some_and(|tag| !tag.is_empty() && tag.chars().all(|c| c.is_ascii_hexdigit()))
        })
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    archives.sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
    for (_, path) in archives.into_iter().skip(keep) {
        let _ = std::fs::remove_file(path);
    }
}

fn build_in(
    name: &str,
    rootfs: &Path,
    config: &ImageConfig,
    cache: &Path,
    work: &Path,
) -> Result<Image, String> {
    // A reproducible layer: sorted names, one owner, one time.
    let layer_path = work.join("layer.tar");
    run(
        Command::new("tar")
            .arg("-C")
            .arg(rootfs)
            .args([
                "--sort=name",
                "--owner=0",
                "--group=0",
                "--numeric-owner",
                "--mtime=@0",
                "--format=posix",
                "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime",
                "-cf",
            ])
            .arg(&layer_path)
            .arg("."),
        &format!("archiving {}", rootfs.display()),
    )?;
    let (layer_digest, layer_size) = file_sha256_hex(&layer_path)?;
    let image_config = json!({
        "architecture": "amd64",
        "os": "linux",
        "config": config.to_json(),
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{layer_digest}")]},
        "history": [{"created_by": format!("trustyai-local-cluster images::build {name}")}],
    });
    let config_bytes = serde_json::to_vec(&image_config).map_err(|e| e.to_string())?;
    let config_digest = sha256_hex(&config_bytes);
    let tag = &config_digest[..16];
    let reference = format!("localhost/{name}:{tag}");
    let archive = cache.join(format!("{name}-{tag}.tar"));
    let image = Image {
        reference: reference.clone(),
        archive: archive.clone(),
    };
    if archive.exists() {
        return Ok(image);
    }
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": format!("sha256:{config_digest}"),
            "size": config_bytes.len(),
        },
        "layers": [{
            "mediaType": "application/vnd.oci.image.layer.v1.tar",
            "digest": format!("sha256:{layer_digest}"),
            "size": layer_size,
        }],
    });
    let manifest_bytes = serde_json::to_vec(&manifest).map_err(|e| e.to_string())?;
    let manifest_digest = sha256_hex(&manifest_bytes);
    let index = json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": format!("sha256:{manifest_digest}"),
            "size": manifest_bytes.len(),
            "annotations": {
                "io.containerd.image.name": reference,
                "org.opencontainers.image.ref.name": tag,
            },
        }],
    });
    let blobs = work.join("blobs/sha256");
    std::fs::rename(&layer_path, blobs.join(&layer_digest)).map_err(|e| e.to_string())?;
    let write =
        |path: PathBuf, bytes: &[u8]| std::fs::write(path, bytes).map_err(|e| e.to_string());
    write(blobs.join(&config_digest), &config_bytes)?;
    write(blobs.join(&manifest_digest), &manifest_bytes)?;
    write(
        work.join("index.json"),
        &serde_json::to_vec(&index).map_err(|e| e.to_string())?,
    )?;
    write(
        work.join("oci-layout"),
        br#"{"imageLayoutVersion":"1.0.0"}"#,
    )?;
    // Written in this build's own folder, then renamed: a build of the same content in another
    // thread or process writes its own and the rename keeps one whole archive.
    let partial = work.join("image.tar");
    run(
        Command::new("tar")
            .arg("-C")
            .arg(work)
            .args(["-cf"])
            .arg(&partial)
            .args(["oci-layout", "index.json", "blobs"]),
        "archiving the image layout",
    )?;
    std::fs::rename(&partial, &archive).map_err(|e| e.to_string())?;
    Ok(image)
}

/// A member of the image archive at `archive`, as bytes.
fn archive_member(archive: &Path, member: &str) -> Result<Vec<u8>, String> {
    let out = Command::new("tar")
        .arg("-xOf")
        .arg(archive)
        .arg(member)
        .output()
        .map_err(|e| format!("reading {member} in {}: {e}", archive.display()))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(format!(
            "reading {member} in {}: {}",
            archive.display(),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The member name of the blob a descriptor names.
fn blob_member(descriptor: &Value) -> Result<String, String> {
    descriptor["digest"]
        .as_str()
        .and_then(|d| d.strip_prefix("sha256:"))
        .map(|d| format!("blobs/sha256/{d}"))
        .ok_or_else(|| "a descriptor without a sha256 digest".to_owned())
}

/// The manifest of the image archive at `archive` (its index's first).
fn read_manifest(archive: &Path) -> Result<Value, String> {
    let json = |bytes: Vec<u8>| -> Result<Value, String> {
        serde_json::from_slice(&bytes).map_err(|e| e.to_string())
    };
    let index = json(archive_member(archive, "index.json")?)?;
    json(archive_member(
        archive,
        &blob_member(&index["manifests"][0])?,
    )?)
}

/// The configuration held by the image archive at `archive`.
pub fn read_config(archive: &Path) -> Result<ImageConfig, String> {
    let manifest = read_manifest(archive)?;
    let bytes = archive_member(archive, &blob_member(&manifest["config"])?)?;
    let config: Value = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    Ok(ImageConfig::from_image_json(&config))
}

/// The paths (without a leading `./`) in the one layer of the image archive at `archive`.
pub fn read_layer_paths(archive: &Path) -> Result<Vec<String>, String> {
    let manifest = read_manifest(archive)?;
    let layer = blob_member(&manifest["layers"][0])?;
    let listing = run(
        Command::new("sh")
            .arg("-c")
            .arg("tar -xOf \"$0\" \"$1\" | tar -t")
            .arg(archive)
            .arg(&layer),
        &format!("listing {layer} in {}", archive.display()),
    )?;
    Ok(listing
        .lines()
        .map(|l| l.trim_start_matches("./").to_owned())
        .collect())
}

/// The pause image every pod's sandbox runs: Debian's static busybox, sleeping.
pub fn pause() -> Result<Image, String> {
    let busybox = Path::new("/bin/busybox");
    if !busybox.exists() {
        return Err(
            "/bin/busybox is missing: install Debian's busybox-static (make prerequisites)".into(),
        );
    }
    let root = scratch_dir("pause-root")?;
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
    std::fs::copy(busybox, root.join("busybox")).map_err(|e| e.to_string())?;
    let config = ImageConfig {
        user: Some("65535:65535".into()),
        entrypoint: vec!["/busybox".into(), "sleep".into(), "2147483647".into()],
        ..ImageConfig::default()
    };
    let image = build("trustyai-pause", &root, &config);
    let _ = std::fs::remove_dir_all(&root);
    image
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pruning_keeps_the_most_recently_used_archives_of_one_name_only() {
        let dir = std::env::temp_dir().join(format!("trustyai-prune-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("folder");
        let day = std::time::Duration::from_secs(86_400);
        let now = std::time::SystemTime::now();
        let file = |name: &str, age: u32| {
            let path = dir.join(name);
            std::fs::write(&path, "x").expect("file");
            let f = std::fs::File::options()
                .append(true)
                .open(&path)
                .expect("open");
            f.set_modified(now - day * age).expect("mtime");
        };
        for (tag, age) in [("aa", 1), ("bb", 2), ("cc", 3), ("dd", 4)] {
            file(&format!("op-{tag}.tar"), age);
        }
        // Another image whose name starts with this one's, and a note.
        file("op-odh-aa.tar", 9);
        file("op.1234.ref", 9);
        prune(&dir, "op", 2);
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .expect("read")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            ["op-aa.tar", "op-bb.tar", "op-odh-aa.tar", "op.1234.ref"]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A folder `trustyai-digest-<name>-<pid>` holding the file `sub/a`.
    fn digest_folder(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("trustyai-digest-{name}-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).expect("folder");
        std::fs::write(dir.join("sub/a"), "one").expect("file");
        dir
    }

    /// The key of a recipe with the folder `dir` as its source.
    fn digest_key(dir: &Path) -> String {
        InputDigest::default()
            .bytes("recipe", b"r")
            .folder("source", dir)
            .expect("read")
            .key()
    }

    #[test]
    fn an_input_digest_is_the_same_for_the_same_inputs() {
        let dir = digest_folder("same");
        let first = digest_key(&dir);
        assert_eq!(digest_key(&dir), first, "the same inputs give the same key");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_input_digest_changes_with_a_files_content() {
        let dir = digest_folder("content");
        let first = digest_key(&dir);
        std::fs::write(dir.join("sub/a"), "two").expect("file");
        assert_ne!(digest_key(&dir), first);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_input_digest_changes_with_a_files_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = digest_folder("mode");
        let before = digest_key(&dir);
        std::fs::set_permissions(dir.join("sub/a"), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        assert_ne!(digest_key(&dir), before, "the executable bit is an input");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
