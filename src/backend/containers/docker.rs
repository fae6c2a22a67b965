//! The Docker engine through bollard: the lab's `Engine` trait over the Docker Engine API, with
//! the API version negotiated so older daemons (Debian's 20.10) and newer ones both answer.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use bollard::container::{
    Config, CreateContainerOptions, DownloadFromContainerOptions, ListContainersOptions, LogOutput,
    LogsOptions, RemoveContainerOptions, WaitContainerOptions,
};
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::image::{BuildImageOptions, CreateImageOptions, PushImageOptions, TagImageOptions};
use bollard::models::{HostConfig, Mount as BollardMount, MountTypeEnum};
use bollard::volume::{CreateVolumeOptions, ListVolumesOptions, RemoveVolumeOptions};
use bollard::Docker;
use futures_util::StreamExt;

use super::engine::{ContainerSpec, Engine, ExitState, ImageInfo, Mount, Network, OutputLine};
use crate::backend::EngineError;
use crate::record::manifest::EngineManifest;
use crate::spec::Sandbox;

pub struct DockerEngine {
    docker: Docker,
    /// The engine's own socket on this host, which no container may ever see.
    socket: PathBuf,
}

impl DockerEngine {
    /// Connects to the local engine (DOCKER_HOST or the default socket) and checks it answers.
    pub async fn connect() -> Result<DockerEngine, EngineError> {
        let endpoint = std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into());
        let unreachable = |e: bollard::errors::Error| EngineError::Unreachable {
            endpoint: endpoint.clone(),
            detail: e.to_string(),
        };
        let docker = Docker::connect_with_local_defaults().map_err(unreachable)?;
        let docker = docker.negotiate_version().await.map_err(unreachable)?;
        docker.ping().await.map_err(unreachable)?;
        let socket = endpoint.strip_prefix("unix://").unwrap_or("/var/run/docker.sock");
        let socket = std::fs::canonicalize(socket).unwrap_or_else(|_| PathBuf::from(socket));
        Ok(DockerEngine { docker, socket })
    }

    /// A container's log stream (followed to the container's exit, or read as it stands), a line
    /// at a time; a last line without its newline is passed on too.
    async fn lines(
        &self,
        id: &str,
        follow: bool,
        on_line: &mut (dyn FnMut(OutputLine) + Send),
    ) -> Result<(), EngineError> {
        let opts = LogsOptions::<String> { follow, stdout: true, stderr: true, ..Default::default() };
        let mut stream = self.docker.logs(id, Some(opts));
        let what = if follow { "follow output of" } else { "read output of" };
        let (mut out, mut err) = (Vec::<u8>::new(), Vec::<u8>::new());
        while let Some(item) = stream.next().await {
            let (buf, is_out, message) = match item.map_err(|e| EngineError::op(what, id, e))? {
                LogOutput::StdOut { message } => (&mut out, true, message),
                LogOutput::StdErr { message } => (&mut err, false, message),
                _ => continue,
            };
            buf.extend_from_slice(&message);
            while let Some(pos) = buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = buf.drain(..=pos).collect();
                let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
                on_line(if is_out { OutputLine::Stdout(text) } else { OutputLine::Stderr(text) });
            }
        }
        for (buf, is_out) in [(out, true), (err, false)] {
            if !buf.is_empty() {
                let text = String::from_utf8_lossy(&buf).into_owned();
                on_line(if is_out { OutputLine::Stdout(text) } else { OutputLine::Stderr(text) });
            }
        }
        Ok(())
    }
}

fn labels_map(labels: &BTreeMap<String, String>) -> HashMap<String, String> {
    labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Whether bind-mounting `source` would put the engine's socket inside a container: the socket
/// itself or any folder above it (`/`, `/run`, `/var/run`). Whoever holds that socket is root on
/// the host.
fn exposes_socket(source: &Path, socket: &Path) -> bool {
    let source = std::fs::canonicalize(source).unwrap_or_else(|_| source.to_path_buf());
    socket.starts_with(&source)
}

/// A network's `network_mode` and `extra_hosts`.
fn network_options(network: &Network) -> (Option<String>, Option<Vec<String>>) {
    match network {
        Network::Loopback { hosts } => (
            Some("none".to_string()),
            (!hosts.is_empty()).then(|| hosts.iter().map(|h| format!("{h}:127.0.0.1")).collect()),
        ),
        Network::Container(id) => (Some(format!("container:{id}")), None),
        Network::Egress => (Some("bridge".to_string()), None),
    }
}

/// The HostConfig and Config fields of a sandbox, on top of the engine's defaults.
fn apply_sandbox(sandbox: &Sandbox, host: &mut HostConfig, config: &mut Config<String>) {
    if sandbox.drop_all_capabilities {
        host.cap_drop = Some(vec!["ALL".to_string()]);
        if !sandbox.keep_capabilities.is_empty() {
            host.cap_add = Some(sandbox.keep_capabilities.clone());
        }
    }
    if sandbox.no_new_privileges {
        host.security_opt = Some(vec!["no-new-privileges".to_string()]);
    }
    if sandbox.read_only_root {
        host.readonly_rootfs = Some(true);
    }
    if !sandbox.scratch.is_empty() {
        host.tmpfs = Some(
            sandbox
                .scratch
                .iter()
                .map(|(path, bytes)| (path.clone(), format!("rw,nosuid,nodev,noexec,size={bytes},mode=1777")))
                .collect(),
        );
    }
    host.pids_limit = sandbox.pids_limit.map(i64::from);
    config.user = sandbox.user.map(|(uid, gid)| format!("{uid}:{gid}"));
}

fn is_not_found(e: &bollard::errors::Error) -> bool {
    matches!(e, bollard::errors::Error::DockerResponseServerError { status_code: 404, .. })
}

impl Engine for DockerEngine {
    async fn describe(&self) -> Result<EngineManifest, EngineError> {
        let v = self.docker.version().await.map_err(|e| EngineError::op("query", "engine version", e))?;
        Ok(EngineManifest {
            kind: "docker".into(),
            version: v.version.unwrap_or_default(),
            api_version: self.docker.client_version().to_string(),
        })
    }

    async fn image(&self, reference: &str) -> Result<Option<ImageInfo>, EngineError> {
        match self.docker.inspect_image(reference).await {
            Ok(img) => Ok(Some(ImageInfo {
                id: img.id.unwrap_or_default(),
                labels: img.config.and_then(|c| c.labels).unwrap_or_default().into_iter().collect(),
            })),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(EngineError::op("inspect image", reference, e)),
        }
    }

    async fn import_rootfs(
        &self,
        tar: &Path,
        reference: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<ImageInfo, EngineError> {
        let (repo, tag) = reference.rsplit_once(':').unwrap_or((reference, "latest"));
        let body =
            tokio::fs::read(tar).await.map_err(|e| EngineError::op("read", tar.display().to_string(), e))?;
        let changes: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("LABEL {k}={}", serde_json::Value::String(v.clone())))
            .collect();
        let opts = CreateImageOptions {
            from_src: "-",
            repo,
            tag,
            changes: changes.iter().map(String::as_str).collect(),
            ..Default::default()
        };
        let mut stream = self.docker.create_image(Some(opts), Some(body.into()), None);
        while let Some(item) = stream.next().await {
            item.map_err(|e| EngineError::op("import", reference, e))?;
        }
        self.image(reference).await?.ok_or_else(|| {
            EngineError::op("import", reference, "the engine reports no image after the import")
        })
    }

    async fn pull(&self, reference: &str) -> Result<ImageInfo, EngineError> {
        let opts = CreateImageOptions { from_image: reference, ..Default::default() };
        let mut stream = self.docker.create_image(Some(opts), None, None);
        while let Some(item) = stream.next().await {
            item.map_err(|e| EngineError::Pull { reference: reference.into(), detail: e.to_string() })?;
        }
        self.image(reference).await?.ok_or_else(|| EngineError::Pull {
            reference: reference.into(),
            detail: "no image after the pull".into(),
        })
    }

    async fn push(&self, image: &str, repo: &str, tag: &str) -> Result<String, EngineError> {
        let object = format!("{repo}:{tag}");
        self.docker
            .tag_image(image, Some(TagImageOptions { repo, tag }))
            .await
            .map_err(|e| EngineError::op("tag", &object, e))?;
        let mut stream = self.docker.push_image(repo, Some(PushImageOptions { tag }), None);
        while let Some(item) = stream.next().await {
            let info = item.map_err(|e| EngineError::op("push", &object, e))?;
            if let Some(e) = info.error {
                return Err(EngineError::op("push", &object, e));
            }
        }
        // The engine learns the digest from the registry's answer to the push.
        let digests = self.repo_digests(&object).await?;
        digests.into_iter().find(|d| d.starts_with(&format!("{repo}@"))).ok_or_else(|| {
            EngineError::op("push", &object, "the registry accepted the push but no digest came back")
        })
    }

    async fn repo_digests(&self, reference: &str) -> Result<Vec<String>, EngineError> {
        let img = self
            .docker
            .inspect_image(reference)
            .await
            .map_err(|e| EngineError::op("inspect image", reference, e))?;
        Ok(img.repo_digests.unwrap_or_default())
    }

    async fn build(
        &self,
        context: Vec<u8>,
        reference: &str,
        labels: &BTreeMap<String, String>,
        log: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ImageInfo, EngineError> {
        let opts = BuildImageOptions {
            dockerfile: "Dockerfile".to_string(),
            t: reference.to_string(),
            rm: true,
            forcerm: true,
            labels: labels_map(labels),
            ..Default::default()
        };
        let mut stream = self.docker.build_image(opts, None, Some(context.into()));
        let mut tail: Vec<String> = Vec::new();
        let mut step = String::new();
        let fail = |detail: String, step: &str, tail: &[String]| EngineError::Build {
            reference: reference.into(),
            step: step.to_string(),
            detail,
            tail: tail.join("\n"),
        };
        while let Some(item) = stream.next().await {
            let info = item.map_err(|e| fail(e.to_string(), &step, &tail))?;
            if let Some(text) = info.stream {
                for line in text.lines().filter(|l| !l.trim().is_empty()) {
                    if line.starts_with("Step ") {
                        step = line.to_string();
                    }
                    log(line);
                    tail.push(line.to_string());
                    if tail.len() > 30 {
                        tail.remove(0);
                    }
                }
            }
            if let Some(err) = info.error {
                return Err(fail(err, &step, &tail));
            }
        }
        self.image(reference)
            .await?
            .ok_or_else(|| fail("the engine reports no image after the build".into(), &step, &tail))
    }

    async fn create_volume(
        &self,
        name: &str,
        size_bytes: u64,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), EngineError> {
        let mut driver_opts = HashMap::new();
        driver_opts.insert("type".to_string(), "tmpfs".to_string());
        driver_opts.insert("device".to_string(), "tmpfs".to_string());
        driver_opts.insert("o".to_string(), format!("size={size_bytes},mode=1777"));
        self.docker
            .create_volume(CreateVolumeOptions {
                name: name.to_string(),
                driver: "local".to_string(),
                driver_opts,
                labels: labels_map(labels),
            })
            .await
            .map_err(|e| EngineError::op("create volume", name, e))?;
        Ok(())
    }

    async fn create_container(&self, spec: &ContainerSpec) -> Result<String, EngineError> {
        for m in &spec.mounts {
            if let Mount::Bind { source, .. } = m {
                if exposes_socket(source, &self.socket) {
                    return Err(EngineError::op(
                        "create container",
                        &spec.name,
                        format!(
                            "mounting {} would hand it the engine's socket {}: refused",
                            source.display(),
                            self.socket.display()
                        ),
                    ));
                }
            }
        }
        let mounts = spec
            .mounts
            .iter()
            .map(|m| match m {
                Mount::Bind { source, target, read_only } => BollardMount {
                    target: Some(target.clone()),
                    source: Some(source.display().to_string()),
                    typ: Some(MountTypeEnum::BIND),
                    read_only: Some(*read_only),
                    ..Default::default()
                },
                Mount::Volume { name, target } => BollardMount {
                    target: Some(target.clone()),
                    source: Some(name.clone()),
                    typ: Some(MountTypeEnum::VOLUME),
                    ..Default::default()
                },
            })
            .collect();
        let mut host_config = HostConfig {
            mounts: Some(mounts),
            cpuset_cpus: (!spec.cpuset.is_empty()).then(|| spec.cpuset.clone()),
            memory: spec.memory.map(|m| m as i64),
            memory_swap: spec.memory.map(|m| m as i64),
            nano_cpus: spec.nano_cpus,
            ..Default::default()
        };
        (host_config.network_mode, host_config.extra_hosts) = network_options(&spec.network);
        let mut config = Config {
            image: Some(spec.image.clone()),
            cmd: Some(spec.cmd.clone()),
            entrypoint: Some(Vec::new()),
            env: Some(spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
            labels: Some(labels_map(&spec.labels)),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            ..Default::default()
        };
        apply_sandbox(&spec.sandbox, &mut host_config, &mut config);
        config.host_config = Some(host_config);
        let created = self
            .docker
            .create_container(
                Some(CreateContainerOptions { name: spec.name.clone(), platform: None }),
                config,
            )
            .await
            .map_err(|e| EngineError::op("create container", &spec.name, e))?;
        Ok(created.id)
    }

    async fn start(&self, id: &str) -> Result<(), EngineError> {
        self.docker
            .start_container::<String>(id, None)
            .await
            .map_err(|e| EngineError::op("start container", id, e))
    }

    async fn follow(
        &self,
        id: &str,
        on_line: &mut (dyn FnMut(OutputLine) + Send),
    ) -> Result<(), EngineError> {
        self.lines(id, true, on_line).await
    }

    async fn output(
        &self,
        id: &str,
        on_line: &mut (dyn FnMut(OutputLine) + Send),
    ) -> Result<(), EngineError> {
        self.lines(id, false, on_line).await
    }

    async fn wait(&self, id: &str) -> Result<ExitState, EngineError> {
        let mut stream =
            self.docker.wait_container(id, Some(WaitContainerOptions { condition: "not-running" }));
        // A non-zero exit arrives as an error item; the state is read below either way.
        while let Some(_item) = stream.next().await {}
        let inspect = self
            .docker
            .inspect_container(id, None)
            .await
            .map_err(|e| EngineError::op("inspect container", id, e))?;
        let state = inspect.state.unwrap_or_default();
        Ok(ExitState { code: state.exit_code.unwrap_or(-1), oom_killed: state.oom_killed.unwrap_or(false) })
    }

    async fn read_file(&self, id: &str, path: &str) -> Result<Option<Vec<u8>>, EngineError> {
        let mut stream = self.docker.download_from_container(id, Some(DownloadFromContainerOptions { path }));
        let mut tar_bytes = Vec::new();
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(b) => tar_bytes.extend_from_slice(&b),
                Err(e) if is_not_found(&e) => return Ok(None),
                Err(e) => return Err(EngineError::op("copy out of", format!("{id}:{path}"), e)),
            }
        }
        let mut archive = tar::Archive::new(tar_bytes.as_slice());
        let entries = archive.entries().map_err(|e| EngineError::op("unpack", path, e))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| EngineError::op("unpack", path, e))?;
            if entry.header().entry_type().is_file() {
                let mut data = Vec::new();
                std::io::Read::read_to_end(&mut entry, &mut data)
                    .map_err(|e| EngineError::op("unpack", path, e))?;
                return Ok(Some(data));
            }
        }
        Ok(None)
    }

    async fn exec(
        &self,
        id: &str,
        argv: &[String],
        env: &[(String, String)],
    ) -> Result<(i64, String), EngineError> {
        let what = || format!("{id}: {}", argv.join(" "));
        let options = CreateExecOptions {
            cmd: Some(argv.to_vec()),
            env: Some(env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            ..Default::default()
        };
        let created =
            self.docker.create_exec(id, options).await.map_err(|e| EngineError::op("exec in", what(), e))?;
        let mut text = String::new();
        if let StartExecResults::Attached { mut output, .. } = self
            .docker
            .start_exec(&created.id, None)
            .await
            .map_err(|e| EngineError::op("exec in", what(), e))?
        {
            while let Some(item) = output.next().await {
                match item.map_err(|e| EngineError::op("exec in", what(), e))? {
                    LogOutput::StdOut { message }
                    | LogOutput::StdErr { message }
                    | LogOutput::Console { message } => text.push_str(&String::from_utf8_lossy(&message)),
                    LogOutput::StdIn { .. } => {}
                }
            }
        }
        let inspect = self
            .docker
            .inspect_exec(&created.id)
            .await
            .map_err(|e| EngineError::op("inspect exec in", what(), e))?;
        Ok((inspect.exit_code.unwrap_or(-1), text))
    }

    async fn remove_container(&self, id: &str) -> Result<(), EngineError> {
        match self
            .docker
            .remove_container(id, Some(RemoveContainerOptions { force: true, v: true, ..Default::default() }))
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(EngineError::op("remove container", id, e)),
        }
    }

    async fn remove_volume(&self, name: &str) -> Result<(), EngineError> {
        match self.docker.remove_volume(name, Some(RemoveVolumeOptions { force: true })).await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(EngineError::op("remove volume", name, e)),
        }
    }

    async fn remove_labelled(&self, label: &str) -> Result<usize, EngineError> {
        let mut filters = HashMap::new();
        filters.insert("label".to_string(), vec![label.to_string()]);
        let containers = self
            .docker
            .list_containers(Some(ListContainersOptions {
                all: true,
                filters: filters.clone(),
                ..Default::default()
            }))
            .await
            .map_err(|e| EngineError::op("list containers labelled", label, e))?;
        let mut n = 0;
        for c in containers {
            if let Some(id) = c.id {
                self.remove_container(&id).await?;
                n += 1;
            }
        }
        let volumes = self
            .docker
            .list_volumes(Some(ListVolumesOptions { filters }))
            .await
            .map_err(|e| EngineError::op("list volumes labelled", label, e))?;
        for v in volumes.volumes.unwrap_or_default() {
            self.remove_volume(&v.name).await?;
            n += 1;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_socket_and_the_folders_above_it_are_never_mounted() {
        let sock = Path::new("/run/docker.sock");
        for bad in ["/run/docker.sock", "/run", "/", "/run/"] {
            assert!(exposes_socket(Path::new(bad), sock), "{bad}");
        }
        for fine in ["/run/user", "/usr/local/bin/benchlab", "/tmp/lock"] {
            assert!(!exposes_socket(Path::new(fine), sock), "{fine}");
        }
    }

    #[test]
    fn loopback_names_become_extra_hosts_only_on_a_network_of_its_own() {
        let hosts = vec!["mock-api".to_string(), "redis".to_string()];
        assert_eq!(
            network_options(&Network::Loopback { hosts }),
            (Some("none".into()), Some(vec!["mock-api:127.0.0.1".into(), "redis:127.0.0.1".into()]))
        );
        assert_eq!(network_options(&Network::Loopback { hosts: vec![] }), (Some("none".into()), None));
        assert_eq!(network_options(&Network::Container("s".into())), (Some("container:s".into()), None));
        assert_eq!(network_options(&Network::Egress), (Some("bridge".into()), None));
    }

    #[test]
    fn a_hardened_sandbox_maps_to_docker_options() {
        let (mut host, mut config) = (HostConfig::default(), Config::<String>::default());
        apply_sandbox(&Sandbox::hardened(), &mut host, &mut config);
        assert_eq!(host.cap_drop, Some(vec!["ALL".to_string()]));
        assert_eq!(host.security_opt, Some(vec!["no-new-privileges".to_string()]));
        assert_eq!(host.readonly_rootfs, Some(true));
        assert_eq!(host.pids_limit, Some(1024));
        let tmpfs = host.tmpfs.unwrap();
        assert_eq!(tmpfs["/tmp"], format!("rw,nosuid,nodev,noexec,size={},mode=1777", 64 << 20));
        assert_eq!(config.user.as_deref(), Some("65534:65534"));
        assert_eq!(host.cap_add, None);
        // The shim's container: root in the lab's group, keeping only what starts the server as
        // another user and kills what it leaves.
        let (mut host, mut config) = (HostConfig::default(), Config::default());
        apply_sandbox(&Sandbox::hardened().for_shim(), &mut host, &mut config);
        assert_eq!(config.user.as_deref(), Some("0:65533"));
        assert_eq!(host.cap_add, Some(vec!["SETUID".into(), "SETGID".into(), "KILL".into()]));
        assert_eq!(host.cap_drop, Some(vec!["ALL".to_string()]));

        let (mut host, mut config) = (HostConfig::default(), Config::<String>::default());
        apply_sandbox(&Sandbox::none(), &mut host, &mut config);
        assert_eq!((host, config.user), (HostConfig::default(), None));
    }
}
