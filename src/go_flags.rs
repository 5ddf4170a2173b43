//! The Go operator's command line, accepted so that its Deployment runs this binary unchanged.
//!
//! The Go operator (`/manager`) takes `--leader-elect`, `--metrics-bind-address`,
//! `--health-probe-bind-address`, `--enable-services`, `--configmap` and zap's `--zap-*` flags,
//! in Go's syntax (one or two dashes, `--flag=value` or `--flag value`), with no subcommand. A
//! migrating admin's first step is swapping the image under that Deployment, so those arguments
//! are rewritten into `run` and our flags before clap sees them; what has no equivalent is
//! dropped with a notice the caller logs.

use std::ffi::OsString;

/// The arguments to parse, and what was rewritten or dropped, for the log.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Translated {
    pub args: Vec<OsString>,
    pub notices: Vec<String>,
}

/// A Go flag and how it maps onto ours.
#[derive(Clone, Copy)]
enum GoFlag {
    LeaderElect,
    MetricsBindAddress,
    HealthProbeBindAddress,
    EnableServices,
    ConfigMap,
    /// zap's logger flags: `--zap-devel` is a boolean, the others take a value.
    Zap {
        takes_value: bool,
    },
}

impl GoFlag {
    fn named(name: &str) -> Option<Self> {
        Some(match name {
            "leader-elect" => Self::LeaderElect,
            "metrics-bind-address" => Self::MetricsBindAddress,
            "health-probe-bind-address" => Self::HealthProbeBindAddress,
            "enable-services" => Self::EnableServices,
            "configmap" => Self::ConfigMap,
            "zap-devel" => Self::Zap { takes_value: false },
            "zap-encoder" | "zap-log-level" | "zap-stacktrace-level" | "zap-time-encoding" => {
                Self::Zap { takes_value: true }
            }
            _ => return None,
        })
    }

    fn takes_value(self) -> bool {
        match self {
            Self::LeaderElect => false,
            Self::Zap { takes_value } => takes_value,
            _ => true,
        }
    }
}

/// Splits `-name`, `--name` or `--name=value` into the Go flag and its inline value.
fn go_flag(arg: &str) -> Option<(GoFlag, &str, Option<&str>)> {
    let body = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'))?;
    let (name, value) = match body.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (body, None),
    };
    GoFlag::named(name).map(|flag| (flag, name, value))
}

/// Go's `:8080` (all interfaces) as a socket address clap parses.
fn socket_address(go: &str) -> String {
    match go.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => go.to_owned(),
    }
}

/// Rewrites the Go operator's arguments; any other command line is returned unchanged.
pub fn translate(args: impl IntoIterator<Item = OsString>) -> Translated {
    let args: Vec<OsString> = args.into_iter().collect();
    let is_go_command_line = args
        .get(1)
        .and_then(|first| first.to_str())
        .is_some_and(|first| go_flag(first).is_some());
    if !is_go_command_line {
        return Translated {
            args,
            notices: Vec::new(),
        };
    }
    let mut out = Translated::default();
    let mut rest = args.into_iter();
    out.args.extend(rest.next());
    out.args.push("run".into());
    while let Some(arg) = rest.next() {
        let Some((flag, name, inline)) = arg.to_str().and_then(go_flag) else {
            out.args.push(arg);
            continue;
        };
        let value: Option<String> = match inline {
            Some(value) => Some(value.to_owned()),
            None if flag.takes_value() => rest.next().map(|v| v.to_string_lossy().into_owned()),
            None => None,
        };
        translate_one(flag, name, value, &mut out);
    }
    out
}

fn translate_one(flag: GoFlag, name: &str, value: Option<String>, out: &mut Translated) {
    let value_text = value.as_deref().unwrap_or("");
    match flag {
        GoFlag::LeaderElect => {
            if matches!(value_text, "false" | "0" | "f" | "F" | "FALSE" | "False") {
                out.args.push("--no-leader-election".into());
                out.notices
                    .push("--leader-elect=false: running without leader election".into());
            } else {
                out.notices
                    .push("--leader-elect: leader election is on unless --no-leader-election".into());
            }
        }
        GoFlag::MetricsBindAddress if value_text == "0" => out.notices.push(
            "--metrics-bind-address=0: metrics cannot be turned off; they stay on --ops-address"
                .into(),
        ),
        GoFlag::MetricsBindAddress => {
            let address = socket_address(value_text);
            out.notices
                .push(format!("--metrics-bind-address {value_text}: --ops-address {address}"));
            out.args.push("--ops-address".into());
            out.args.push(address.into());
        }
        GoFlag::HealthProbeBindAddress if value_text == "0" => out
            .notices
            .push("--health-probe-bind-address=0: probes stay on --ops-address".into()),
        GoFlag::HealthProbeBindAddress => {
            let address = socket_address(value_text);
            out.notices.push(format!(
                "--health-probe-bind-address {value_text}: --probe-address {address}"
            ));
            out.args.push("--probe-address".into());
            out.args.push(address.into());
        }
        GoFlag::EnableServices => {
            let has_tas = value_text
                .split(',')
                .any(|service| service.trim().eq_ignore_ascii_case("TAS"));
            out.notices.push(if has_tas {
                format!("--enable-services {value_text}: this operator runs the TrustyAI service (TAS) only; the others are ignored")
            } else {
                format!("--enable-services {value_text} does not name TAS: this operator runs the TrustyAI service (TAS) regardless")
            });
        }
        GoFlag::ConfigMap | GoFlag::Zap { .. } => out.notices.push(format!(
            "--{name}{}: a Go operator flag with no equivalent here, ignored (see --log-level and --log-format)",
            value.map(|v| format!(" {v}")).unwrap_or_default()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn translated(args: &[&str]) -> Translated {
        translate(args.iter().map(OsString::from))
    }

    fn strings(t: &Translated) -> Vec<String> {
        t.args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_go_deployments_arguments_become_run_with_our_flags() {
        let t = translated(&[
            "/manager",
            "--leader-elect",
            "--metrics-bind-address=:8080",
            "--health-probe-bind-address",
            ":8081",
            "--enable-services",
            "TAS,LMES,GORCH",
            "-zap-log-level=info",
            "--zap-devel",
        ]);
        assert_eq!(
            strings(&t),
            [
                "/manager",
                "run",
                "--ops-address",
                "0.0.0.0:8080",
                "--probe-address",
                "0.0.0.0:8081"
            ]
        );
        assert_eq!(t.notices.len(), 6, "{:?}", t.notices);
        assert!(
            t.notices
                .iter()
                .any(|n| n.contains("LMES") && n.contains("TAS"))
        );
    }

    #[test]
    fn our_own_command_lines_are_untouched() {
        for args in [
            vec!["op", "run", "--no-leader-election"],
            vec!["op", "--log-level", "debug", "run"],
            vec!["op"],
            vec!["op", "validate", "-f", "-"],
        ] {
            let t = translated(&args);
            assert_eq!(strings(&t), args);
            assert!(t.notices.is_empty());
        }
    }

    /// The Go operator's line with leader election off and services that leave TAS out.
    fn leader_election_off_without_tas() -> Translated {
        translated(&["/manager", "--leader-elect=false", "--enable-services=LMES"])
    }

    #[test]
    fn leader_elect_false_becomes_no_leader_election() {
        let t = leader_election_off_without_tas();
        assert_eq!(strings(&t), ["/manager", "run", "--no-leader-election"]);
    }

    #[test]
    fn services_that_leave_out_tas_are_said() {
        let t = leader_election_off_without_tas();
        assert!(
            t.notices[1].contains("does not name TAS"),
            "{:?}",
            t.notices
        );
    }

    #[test]
    fn the_translated_line_parses() {
        use clap::Parser;
        let t = translated(&[
            "/manager",
            "--leader-elect",
            "--metrics-bind-address",
            "127.0.0.1:9090",
            "--health-probe-bind-address=:8081",
        ]);
        let cli = crate::cli::Cli::try_parse_from(t.args).expect("parses");
        let crate::cli::Command::Run(run) = cli.command else {
            panic!("not run");
        };
        assert_eq!(run.ops_address.to_string(), "127.0.0.1:9090");
        assert_eq!(
            run.probe_address.map(|a| a.to_string()).as_deref(),
            Some("0.0.0.0:8081")
        );
        assert!(!run.leader_election.no_leader_election);
    }
}
