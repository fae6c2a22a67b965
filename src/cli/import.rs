//! `benchlab import compose`: a scenario skeleton from a benchmark's compose file, written to a
//! file or printed. The translation is `scenario::compose`'s; this reads, places and writes.

use std::path::{Component, Path, PathBuf};

use super::exit::{Exit, OK};
use crate::scenario::compose::{skeleton, ImportOptions};

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    #[command(subcommand)]
    command: ImportCommand,
}

#[derive(Debug, clap::Subcommand)]
enum ImportCommand {
    /// Write a scenario skeleton from a compose file: each service with a `build` becomes a
    /// [[server]] whose `source` is its build context (a git source with --git and --commit,
    /// else a folder), with its environment and memory limit; what the lab cannot take as
    /// written (CPU quotas, ports, health checks, registry images, networks) gets a `# lab:`
    /// comment saying what it does instead. The load script is transcribed by hand
    /// (docs/reproduce.md).
    ///
    /// Example: benchlab import compose bench/docker-compose.yml --git
    /// https://github.com/armantik/benchmark-mcp-servers --commit ccb84cf -o scenarios/repro.toml
    Compose(ComposeArgs),
}

#[derive(Debug, clap::Args)]
struct ComposeArgs {
    /// The compose file (docker-compose.yml).
    file: PathBuf,
    /// The scenario's name (default: the compose folder's name).
    #[arg(long)]
    name: Option<String>,
    /// The benchmark's repository URL: servers' sources become git sources at --commit.
    #[arg(long, requires = "commit", value_name = "URL")]
    git: Option<String>,
    /// The commit of --git the compose file was read at.
    #[arg(long, requires = "git", value_name = "HASH")]
    commit: Option<String>,
    /// With --git: the compose file's folder inside the repository (default: its top).
    #[arg(long, requires = "git", value_name = "PATH", default_value = "")]
    repo_path: String,
    /// Write the scenario here instead of printing it (refused when the file exists).
    #[arg(long, short = 'o', value_name = "FILE")]
    out: Option<PathBuf>,
}

/// `to` seen from `from` (both folders), `/`-separated.
fn relative(from: &Path, to: &Path) -> String {
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (from, to) = (abs(from), abs(to));
    let f: Vec<Component> = from.components().collect();
    let t: Vec<Component> = to.components().collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".into(); f.len() - common];
    parts.extend(t[common..].iter().map(|c| c.as_os_str().to_string_lossy().into_owned()));
    parts.join("/")
}

pub(super) fn run(args: ImportArgs) -> Result<i32, Exit> {
    let ImportCommand::Compose(a) = args.command;
    let text = std::fs::read_to_string(&a.file)
        .map_err(|e| Exit::input(format!("cannot read {}: {e}", a.file.display())))?;
    let compose_dir = a.file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let scenario_dir = a.out.as_deref().and_then(Path::parent).filter(|p| !p.as_os_str().is_empty());
    let name = a.name.clone().unwrap_or_else(|| {
        std::fs::canonicalize(compose_dir)
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "imported".into())
    });
    let opts = ImportOptions {
        name,
        file: a.file.display().to_string(),
        git: a.git.clone().zip(a.commit.clone()),
        context_prefix: relative(scenario_dir.unwrap_or(Path::new(".")), compose_dir),
        repo_prefix: a.repo_path.trim_matches('/').to_string(),
    };
    let out = skeleton(&text, &opts).map_err(|e| Exit::input(e.to_string()))?;
    match &a.out {
        None => print!("{out}"),
        Some(path) => {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(path).map_err(|e| {
                Exit::input(format!(
                    "cannot write {}: {e} (the skeleton never overwrites a file)",
                    path.display()
                ))
            })?;
            f.write_all(out.as_bytes())
                .map_err(|e| Exit::environment(format!("write {}: {e}", path.display())))?;
            eprintln!(
                "wrote {}: check each `# lab:` comment, then transcribe the load (docs/reproduce.md)",
                path.display()
            );
        }
    }
    Ok(OK)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_folder_is_named_from_another() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("a/b")).unwrap();
        std::fs::create_dir_all(d.path().join("c")).unwrap();
        assert_eq!(super::relative(&d.path().join("c"), &d.path().join("a/b")), "../a/b");
        assert_eq!(super::relative(&d.path().join("a"), &d.path().join("a/b")), "b");
        assert_eq!(super::relative(&d.path().join("a"), &d.path().join("a")), "");
    }
}
