//! MariaDB's image, from Debian 13's packages (`dev/images/mariadb.sh`), for the TrustyAI
//! service's DATABASE mode: non-root, its data in the volume mounted at `/var/lib/mysql`.

use std::collections::BTreeMap;
use std::process::Command;

use super::{Image, ImageConfig, InputDigest, cached, debian};
use crate::command::run;

/// The image's user and group (the package's `mysql`, given a fixed id by the recipe).
pub const UID: u32 = 999;
/// Where the data lives: mount a writable volume here.
pub const DATA_DIR: &str = "/var/lib/mysql";

/// The image, built if no image of the same recipes is cached.
pub fn build() -> Result<Image, String> {
    let recipe = debian::recipes().join("mariadb.sh");
    let key = InputDigest::default()
        .file("mariadb.sh", &recipe)?
        .file("debian-base.sh", &debian::recipes().join("debian-base.sh"))?
        .key();
    cached("mariadb", &key, || {
        let base = debian::base()?;
        let root = super::scratch_dir("mariadb-root")?;
        let result = run(
            Command::new(&recipe).arg(&base).arg(&root),
            "building MariaDB's root (dev/images/mariadb.sh)",
        )
        .and_then(|_| {
            let config = ImageConfig {
                user: Some(format!("{UID}:{UID}")),
                entrypoint: vec!["/entrypoint.sh".into()],
                env: vec!["PATH=/usr/sbin:/usr/bin:/sbin:/bin".into()],
                exposed_ports: vec!["3306/tcp".into()],
                labels: BTreeMap::from([(
                    "org.opencontainers.image.title".to_owned(),
                    "MariaDB from Debian 13's packages".to_owned(),
                )]),
                ..ImageConfig::default()
            };
            super::build("mariadb", &root, &config)
        });
        let _ = std::fs::remove_dir_all(&root);
        result
    })
}
