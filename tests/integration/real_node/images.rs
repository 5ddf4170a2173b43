//! The images made here hold what their recipes say: what runs from them (user, command,
//! ports, labels) and what they ship.

use trustyai_local_cluster::images::{self, Image, ImageConfig};

use super::release::images;

/// The paths in the image's one layer.
fn layer_paths(image: &Image) -> Vec<String> {
    images::read_layer_paths(&image.archive).unwrap_or_else(|e| panic!("{e}"))
}

fn config(image: &Image) -> ImageConfig {
    images::read_config(&image.archive).unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn the_service_image_is_the_lean_runtime_its_containerfile_describes() {
    let image = &images().await.service;
    let config = config(image);
    assert_eq!(config.user.as_deref(), Some("1001"));
    assert_eq!(config.cmd, ["python", "-m", "trustyai_service.main"]);
    let mut ports = config.exposed_ports.clone();
    ports.sort();
    assert_eq!(ports, ["4443/tcp", "8080/tcp", "8081/tcp"]);
    assert_eq!(
        config.labels["org.opencontainers.image.licenses"],
        "Apache-2.0"
    );
    assert!(
        config
            .env
            .iter()
            .any(|e| e.starts_with("PATH=/opt/app-root/bin:")),
        "{:?}",
        config.env
    );
    let paths = layer_paths(image);
    let has = |p: &str| paths.iter().any(|x| x == p);
    assert!(has("licenses/LICENSE"), "the service's licence is kept");
    assert!(has("opt/app-root/bin/python"), "the venv's python");
    for absent in [
        "usr/bin/gcc",
        "usr/bin/cc",
        "usr/include/python3.13/Python.h",
        "tmp/host-ca.crt",
    ] {
        assert!(!has(absent), "{absent} is in the image");
    }
    assert!(
        paths.iter().any(|p| p.contains("site-packages/mariadb/")),
        "the MariaDB connector built against Debian's Connector/C"
    );
}

#[tokio::test]
async fn the_proxy_image_is_the_static_binary_as_a_non_root_user() {
    let image = &images().await.proxy;
    let config = config(image);
    assert_eq!(config.user.as_deref(), Some("65532:65532"));
    assert_eq!(config.entrypoint, ["/usr/local/bin/kube-rbac-proxy"]);
    let paths = layer_paths(image);
    assert!(paths.iter().any(|p| p == "usr/local/bin/kube-rbac-proxy"));
    assert!(paths.iter().any(|p| p == "licenses/LICENSE"));
}
