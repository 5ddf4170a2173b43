//! Lists through each version, whole and paginated.

use crate::support;
use support::control_planes::{self, Concern};

use std::collections::BTreeSet;
use std::time::Instant;

use futures::StreamExt;
use kube::api::{ListParams, PostParams};
use serde_json::json;
use support::cluster::{minimal_spec, tas, tas_api};

use super::*;

#[tokio::test]
async fn two_hundred_objects_list_through_each_version() {
    let (_claim, cp, client, ns) =
        control_planes::exclusive_namespace(Concern::Conversion, "list").await;
    let mut operator = start_operator(cp, &client, &ns, &[]).await;
    let started = Instant::now();

    // Even ones through v1 (with the v1-only spec.image), odd ones through v1alpha1.
    futures::stream::iter(0..200)
        .map(|i| {
            let client = client.clone();
            let ns = ns.clone();
            async move {
                let (version, mut spec) =
                    (if i % 2 == 0 { "v1" } else { "v1alpha1" }, minimal_spec());
                if version == "v1" {
                    spec["image"] = json!(IMAGE);
                }
                tas_api(&client, &ns, version)
                    .create(
                        &PostParams::default(),
                        &tas(version, &format!("svc-{i}"), spec),
                    )
                    .await
                    .unwrap_or_else(|e| panic!("creating svc-{i} through {version}: {e}"));
            }
        })
        .buffer_unordered(10)
        .for_each(|()| async {})
        .await;
    eprintln!("200 objects created in {:?}", started.elapsed());

    let expected: BTreeSet<String> = (0..200).map(|i| format!("svc-{i}")).collect();
    for version in ["v1", "v1alpha1"] {
        let started = Instant::now();
        let list = tas_api(&client, &ns, version)
            .list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("list through {version}: {e}"));
        eprintln!("listed through {version} in {:?}", started.elapsed());
        let names: BTreeSet<String> = list
            .items
            .iter()
            .filter_map(|o| o.metadata.name.clone())
            .collect();
        assert_eq!(names, expected, "through {version}");
        for item in &list.items {
            assert_eq!(
                api_version(item),
                format!("trustyai.opendatahub.io/{version}")
            );
            let name = item.metadata.name.as_deref().unwrap_or("");
            let made_through_v1 = name
                .trim_start_matches("svc-")
                .parse::<u32>()
                .is_ok_and(|i| i % 2 == 0);
            let has_image = item.data["spec"].get("image").is_some();
            assert_eq!(
                has_image,
                version == "v1" && made_through_v1,
                "{name} through {version}"
            );
        }
    }

    // Paginated through v1alpha1: every page converted, nothing repeated or missed.
    let mut names = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut params = ListParams::default().limit(64);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let page = tas_api(&client, &ns, "v1alpha1")
            .list(&params)
            .await
            .expect("page");
        pages += 1;
        assert!(
            page.items
                .iter()
                .all(|o| api_version(o) == "trustyai.opendatahub.io/v1alpha1")
        );
        names.extend(page.items.iter().filter_map(|o| o.metadata.name.clone()));
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
    }
    assert_eq!(pages, 4);
    assert_eq!(names.len(), 200);
    assert_eq!(names.into_iter().collect::<BTreeSet<_>>(), expected);

    assert!(operator.stop().success(), "{}", operator.logs());
}
