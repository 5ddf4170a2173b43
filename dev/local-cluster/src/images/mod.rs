//! Container images made here, without a registry: a root folder becomes a one-layer OCI image
//! archive (a layer tar, a config, a manifest, `index.json` naming the image) that containerd
//! imports. Archives are cached by content in the versioned cache, under their content's tag.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use ring::digest::{SHA256, digest};
use serde_json::{Value, json};

use crate::command::run;

pub mod dockerfile;
pub mod operator;

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

fn sha256_hex(bytes: &[u8]) -> String {
    digest(&SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Makes the one-layer image of `rootfs` with `config`, named `localhost/<name>:<tag>` where the
/// tag is the content's digest; an archive already cached under that tag is reused.
pub fn build(name: &str, rootfs: &Path, config: &ImageConfig) -> Result<Image, String> {
    let cache = cache_dir()?;
    let work = cache.join(format!(".build-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("blobs/sha256")).map_err(|e| e.to_string())?;
    let result = build_in(name, rootfs, config, &cache, &work);
    let _ = std::fs::remove_dir_all(&work);
    result
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
    let layer = std::fs::read(&layer_path).map_err(|e| e.to_string())?;
    let layer_digest = sha256_hex(&layer);
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
            "size": layer.len(),
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
    let partial = archive.with_extension("tar.partial");
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

/// The configuration held by the image archive at `archive`.
pub fn read_config(archive: &Path) -> Result<ImageConfig, String> {
    let read = |member: &str| -> Result<Vec<u8>, String> {
        run(
            Command::new("tar").arg("-xOf").arg(archive).arg(member),
            &format!("reading {member} in {}", archive.display()),
        )
        .map(String::into_bytes)
    };
    let json = |bytes: Vec<u8>| -> Result<Value, String> {
        serde_json::from_slice(&bytes).map_err(|e| e.to_string())
    };
    let blob = |digest: &Value| -> Result<Value, String> {
        let digest = digest
            .as_str()
            .and_then(|d| d.strip_prefix("sha256:"))
            .ok_or("a descriptor without a sha256 digest")?;
        json(read(&format!("blobs/sha256/{digest}"))?)
    };
    let index = json(read("index.json")?)?;
    let manifest = blob(&index["manifests"][0]["digest"])?;
    let config = blob(&manifest["config"]["digest"])?;
    Ok(ImageConfig::from_image_json(&config))
}

/// The pause image every pod's sandbox runs: Debian's static busybox, sleeping.
pub fn pause() -> Result<Image, String> {
    let busybox = Path::new("/bin/busybox");
    if !busybox.exists() {
        return Err(
            "/bin/busybox is missing: install Debian's busybox-static (make prerequisites)".into(),
        );
    }
    let root = cache_dir()?.join(format!(".pause-root-{}", std::process::id()));
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
