//! The spec fields both served versions declare, written once: each version's module calls
//! these macros with what only it has (v1's `image` and `storage.retention`), so a field's
//! name, type, limits and `kubectl explain` text cannot drift between the versions.
//! (The statuses are not shared: their conditions have different shapes.)

/// Declares the version's `TrustyAIServiceSpec` (the `CustomResource` of `$version`, with
/// `$kube` added to its `#[kube]` attributes and `$doc` as its doc) with the shared fields, then
/// `$extra` fields.
macro_rules! trustyai_service_spec {
    (
        $(#[doc = $doc:literal])*
        version: $version:literal,
        kube { $($kube:tt)* },
        extra { $($extra:tt)* }
    ) => {
        #[derive(
            kube::CustomResource,
            serde::Serialize,
            serde::Deserialize,
            Clone,
            Debug,
            Default,
            PartialEq,
            schemars::JsonSchema,
        )]
        $(#[doc = $doc])*
        #[kube(
            group = "trustyai.opendatahub.io",
            version = $version,
            kind = "TrustyAIService",
            plural = "trustyaiservices",
            singular = "trustyaiservice",
            shortname = "tas",
            category = "trustyai",
            namespaced,
            status = "TrustyAIServiceStatus",
            $($kube)*
        )]
        #[serde(rename_all = "camelCase")]
        pub struct TrustyAIServiceSpec {
            /// Number of TrustyAI service replicas. Defaults to 1. With the data on a claim
            /// (PVC storage, and migration) at most one pod runs, and a replacement starts only
            /// once the previous pod has stopped: two service processes never have the
            /// claim's files open at once.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schemars(range(min = $crate::limits::REPLICAS_MIN))]
            pub replicas: Option<i32>,

            /// Where the service keeps the inference data it receives.
            pub storage: StorageSpec,

            /// The data file the service reads and writes on a PVC.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub data: Option<$crate::v1::DataSpec>,

            /// How often and over how many observations metrics are computed.
            pub metrics: $crate::v1::MetricsSpec,

            $($extra)*
        }
    };
}

/// Declares the version's `StorageSpec` with the shared fields, then `$extra` fields.
macro_rules! storage_spec {
    (extra { $($extra:tt)* }) => {
        /// Storage of the inference data.
        #[derive(
            serde::Serialize,
            serde::Deserialize,
            Clone,
            Debug,
            Default,
            PartialEq,
            schemars::JsonSchema,
        )]
        #[serde(rename_all = "camelCase")]
        pub struct StorageSpec {
            /// Storage format: `PVC` (files on a PersistentVolumeClaim) or `DATABASE` (a database
            /// described by a credentials Secret). `DATABASE` with `folder` and `data.filename`
            /// set is migration mode: the service moves the data from the PVC into the database.
            #[schemars(extend("enum" = ["PVC", "DATABASE"]))]
            pub format: String,

            /// Absolute path at which the PVC is mounted in the service container, for example
            /// `/inputs`. Defaults to `/inputs` with PVC storage.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schemars(length(max = $crate::limits::FOLDER_MAX))]
            pub folder: Option<String>,

            /// Requested size of the PVC, a Kubernetes quantity such as `1Gi`. Defaults to `1Gi`
            /// with PVC storage. It may grow (the PVC is expanded where the StorageClass allows)
            /// but never shrink.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schemars(length(max = $crate::limits::SIZE_MAX))]
            pub size: Option<String>,

            /// Name of the Secret, in the same namespace, holding the database credentials
            /// (keys `databaseKind`, `databaseUsername`, `databasePassword`, `databaseService`,
            /// `databasePort`, `databaseName`). Defaults to `<name>-db-credentials` with
            /// DATABASE storage.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schemars(length(max = $crate::limits::OBJECT_NAME_MAX))]
            pub database_configurations: Option<String>,

            /// Name of an existing PersistentVolume to bind the PVC to (the PVC then gets
            /// `volumeName` and an empty `storageClassName`). Only with PVC storage or in
            /// migration mode. Cannot be changed once set; removed only with the end of a
            /// migration (the PVC is kept).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schemars(length(max = $crate::limits::OBJECT_NAME_MAX))]
            pub pv: Option<String>,

            $($extra)*
        }
    };
}

pub(crate) use {storage_spec, trustyai_service_spec};
