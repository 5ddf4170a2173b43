//! The parts of a Dockerfile the image builder follows: the build stage's last `RUN` (run in
//! the repository, which is what the build stage copies), and the final stage, which must start
//! `FROM scratch` and may `COPY --from=<build stage>`, set `USER`, `EXPOSE`, `LABEL`, `ENV`,
//! `WORKDIR`, `ENTRYPOINT` and `CMD`. Anything else in the final stage is refused by name.

use std::collections::BTreeMap;

use super::ImageConfig;

/// What the Dockerfile says to build and to ship.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipe {
    /// The build stage's last `RUN`, as a shell command.
    pub build: String,
    /// The build stage's `WORKDIR` (where `COPY . .` put the repository).
    pub build_dir: String,
    /// `(source in the build stage, destination in the image)` per `COPY --from`.
    pub copies: Vec<(String, String)>,
    pub config: ImageConfig,
}

/// One instruction: its keyword (upper case) and its arguments, continuation lines joined.
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if pending.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        if trimmed.starts_with('#') {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(part) => {
                pending.push_str(part);
                pending.push(' ');
            }
            None => {
                pending.push_str(trimmed);
                let (keyword, args) = pending
                    .split_once(char::is_whitespace)
                    .unwrap_or((pending.as_str(), ""));
                out.push((keyword.to_ascii_uppercase(), args.trim().to_owned()));
                pending.clear();
            }
        }
    }
    out
}

/// Reads one word of `chars` up to `stop` or a space outside double quotes (the quotes dropped).
fn word(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, stop: char) -> String {
    let mut s = String::new();
    let mut quoted = false;
    while let Some(&c) = chars.peek() {
        if c == '"' {
            quoted = !quoted;
            chars.next();
            continue;
        }
        if !quoted && (c == stop || c.is_whitespace()) {
            break;
        }
        s.push(c);
        chars.next();
    }
    s
}

/// Splits `a=b "c d"=e` style arguments (LABEL, ENV) into pairs.
fn pairs(args: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut chars = args.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(out);
        }
        let key = word(&mut chars, '=');
        if chars.next() != Some('=') {
            return Err(format!("expected key=value in {args:?}"));
        }
        let value = word(&mut chars, ' ');
        out.push((key, value));
    }
}

fn exec_form(args: &str, keyword: &str) -> Result<Vec<String>, String> {
    serde_json::from_str(args)
        .map_err(|e| format!("{keyword} must be in exec form (a JSON array): {args:?}: {e}"))
}

/// Applies one instruction that shapes what runs from the image (`USER`, `WORKDIR`, `EXPOSE`,
/// `LABEL`, `ENV`, `ENTRYPOINT`, `CMD`) to `config`; false for any other instruction.
fn apply_config(
    config: &mut ImageConfig,
    labels: &mut BTreeMap<String, String>,
    keyword: &str,
    args: &str,
) -> Result<bool, String> {
    match keyword {
        "USER" => config.user = Some(args.to_owned()),
        "WORKDIR" => config.working_dir = Some(args.to_owned()),
        "EXPOSE" => config
            .exposed_ports
            .extend(args.split_whitespace().map(|p| {
                if p.contains('/') {
                    p.to_owned()
                } else {
                    format!("{p}/tcp")
                }
            })),
        "LABEL" => labels.extend(pairs(args)?),
        "ENV" => config
            .env
            .extend(pairs(args)?.into_iter().map(|(k, v)| format!("{k}={v}"))),
        "ENTRYPOINT" => config.entrypoint = exec_form(args, "ENTRYPOINT")?,
        "CMD" => config.cmd = exec_form(args, "CMD")?,
        _ => return Ok(false),
    }
    Ok(true)
}

/// What runs from the image a single-stage Containerfile describes: its last stage's
/// configuration instructions, with `${NAME}` replaced from `args` (a build's `--build-arg`s);
/// its other instructions (`FROM`, `RUN`, `COPY`, `ARG`) are the image recipe's own to follow.
pub fn runtime_config(text: &str, args: &BTreeMap<String, String>) -> Result<ImageConfig, String> {
    let all = instructions(text);
    let last = all
        .iter()
        .rposition(|(k, _)| k == "FROM")
        .ok_or("no FROM")?;
    let mut config = ImageConfig::default();
    let mut labels = BTreeMap::new();
    for (keyword, raw) in &all[last + 1..] {
        let mut text = raw.clone();
        for (name, value) in args {
            text = text.replace(&format!("${{{name}}}"), value);
        }
        apply_config(&mut config, &mut labels, keyword, &text)?;
    }
    config.labels = labels;
    Ok(config)
}

/// Reads the recipe from a Dockerfile's text.
pub fn parse(text: &str) -> Result<Recipe, String> {
    let all = instructions(text);
    let stages: Vec<usize> = all
        .iter()
        .enumerate()
        .filter(|(_, (k, _))| k == "FROM")
        .map(|(i, _)| i)
        .collect();
    let (&build_at, &final_at) = match stages.as_slice() {
        [.., build, last] => (build, last),
        _ => return Err("a build stage and a final stage are needed".into()),
    };
    let build_stage = &all[build_at..final_at];
    let stage_name = build_stage[0]
        .1
        .split_whitespace()
        .collect::<Vec<_>>()
        .windows(2)
        .find(|w| w[0].eq_ignore_ascii_case("AS"))
        .map(|w| w[1].to_owned())
        .ok_or("the build stage has no name (FROM ... AS <name>)")?;
    // The last of each is the one in force when the build runs.
    let last = |keyword: &str| {
        let instruction = build_stage.iter().rev().find(|(k, _)| k == keyword);
        instruction.map(|(_, args)| args.clone())
    };
    let build = last("RUN").ok_or("the build stage has no RUN")?;
    let build_dir = last("WORKDIR").unwrap_or_else(|| "/".into());
    let final_stage = &all[final_at..];
    if final_stage[0].1.trim() != "scratch" {
        return Err(format!(
            "the final stage must start FROM scratch (everything it holds is made here), not {}",
            final_stage[0].1
        ));
    }
    let mut recipe = Recipe {
        build,
        build_dir,
        copies: Vec::new(),
        config: ImageConfig::default(),
    };
    let mut labels = BTreeMap::new();
    for (keyword, args) in &final_stage[1..] {
        match keyword.as_str() {
            "COPY" => {
                let words: Vec<&str> = args.split_whitespace().collect();
                let from = format!("--from={stage_name}");
                match words.as_slice() {
                    [flag, source, destination] if *flag == from => recipe
                        .copies
                        .push(((*source).into(), (*destination).into())),
                    _ => {
                        return Err(format!(
                            "COPY must be `{from} <source> <destination>`: {args}"
                        ));
                    }
                }
            }
            _ if apply_config(&mut recipe.config, &mut labels, keyword, args)? => {}
            other => {
                return Err(format!(
                    "the final stage's {other} is not something the image builder does"
                ));
            }
        }
    }
    recipe.config.labels = labels;
    Ok(recipe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repositorys_dockerfile_is_a_recipe_the_builder_follows() {
        let text = include_str!("../../../../Dockerfile");
        let recipe = parse(text).expect("a recipe");
        assert!(
            recipe.build.contains("cargo build --release"),
            "{}",
            recipe.build
        );
        assert_eq!(recipe.build_dir, "/src");
        assert_eq!(recipe.config.user.as_deref(), Some("65532:65532"));
        assert_eq!(recipe.config.entrypoint, ["/trustyai-operator"]);
        assert_eq!(recipe.config.cmd, ["run"]);
        assert_eq!(recipe.config.exposed_ports, ["8443/tcp", "8080/tcp"]);
        assert_eq!(recipe.copies.len(), 2);
        assert_eq!(
            recipe
                .config
                .labels
                .get("org.opencontainers.image.licenses")
                .map(String::as_str),
            Some("Apache-2.0")
        );
    }

    #[test]
    fn a_final_stage_from_a_registry_image_is_refused() {
        let text = "FROM rust AS build\nRUN make\nFROM debian:12\nCOPY --from=build /a /a\n";
        let err = parse(text).expect_err("refused");
        assert!(err.contains("FROM scratch"), "{err}");
    }

    #[test]
    fn an_instruction_the_builder_does_not_follow_is_named() {
        let text = "FROM rust AS build\nRUN make\nFROM scratch\nRUN rm -rf /\n";
        let err = parse(text).expect_err("refused");
        assert!(err.contains("RUN"), "{err}");
    }

    #[test]
    fn quoted_labels_over_continued_lines_are_read() {
        let text =
            "FROM rust AS build\nRUN make\nFROM scratch\nLABEL a=\"one two\" \\\n  b=three\n";
        let recipe = parse(text).expect("a recipe");
        assert_eq!(
            recipe.config.labels.get("a").map(String::as_str),
            Some("one two")
        );
        assert_eq!(
            recipe.config.labels.get("b").map(String::as_str),
            Some("three")
        );
    }

    /// The runtime config of a two-stage Containerfile built with `VERSION=1.2`.
    fn two_stage_runtime_config() -> ImageConfig {
        let text = "ARG BASE=x\nFROM builder AS b\nUSER 0\nFROM ${BASE}\nUSER root\n\
                    RUN pip install .\nUSER 1001\nEXPOSE 8081 4443/tcp\n\
                    CMD [\"python\", \"-m\", \"app\"]\n\
                    LABEL version=\"${VERSION}\" title=\"App\"\n";
        let args = BTreeMap::from([("VERSION".to_owned(), "1.2".to_owned())]);
        runtime_config(text, &args).expect("a config")
    }

    #[test]
    fn a_containerfiles_runtime_config_is_its_last_stages() {
        let config = two_stage_runtime_config();
        assert_eq!(config.user.as_deref(), Some("1001"));
        assert_eq!(config.exposed_ports, ["8081/tcp", "4443/tcp"]);
        assert_eq!(config.cmd, ["python", "-m", "app"]);
        assert_eq!(config.labels["title"], "App");
    }

    #[test]
    fn build_args_fill_a_containerfiles_labels() {
        let config = two_stage_runtime_config();
        assert_eq!(config.labels["version"], "1.2");
    }
}
