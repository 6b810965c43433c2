//! Configuration: NGINX syntax in, a typed [`Config`] out.
//!
//! `lexer` and `parser` turn files into a directive tree (with `include`
//! expanded and every directive carrying file:line); `directives` holds the
//! table of accepted directives and builds the typed `model` from the tree.

pub mod addition_conf;
pub mod app_upstream;
pub mod cache_conf;
pub mod content;
pub mod dav_conf;
pub mod directives;
pub mod error;
mod group;
pub mod lexer;
pub mod listen_opts;
pub mod locations;
pub mod main_conf;
pub mod model;
pub mod modules;
pub mod parser;
pub mod rewrite;
pub mod server_names;
pub mod setting_types;
pub mod stream;
pub mod userid_conf;
pub mod value;

use std::path::{Path, PathBuf};

pub use error::ConfError;
pub use model::*;
pub use parser::Directive;

/// The configuration used when no `-c FILE` is given: serve one directory on
/// 127.0.0.1:8080 (`-l` changes it) in the foreground, as the invoking
/// user, listing directories and logging each request to the terminal as
/// `python3 -m http.server` or `caddy file-server --browse` do. A config
/// file gets none of this unless it says so.
pub const EMBEDDED: &str = r#"# porter's embedded default configuration (shown by `porter -T`).
daemon off;
worker_processes auto;
pid /tmp/porter-@PORT@.pid;
error_log stderr notice;

events {
    worker_connections 1024;
}

http {
    include mime.types;
    default_type application/octet-stream;
    access_log /dev/stdout combined;
    sendfile on;

    server {
        listen @LISTEN@;
        location / {
            root @ROOT@;
            index index.html;
            autoindex on;
        }
    }
}
"#;

/// The embedded configuration's address when `-l` does not give one.
pub const EMBEDDED_LISTEN: std::net::SocketAddr = std::net::SocketAddr::V4(
    std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 8080),
);

/// Where the configuration comes from and what the command line overrides.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// `-p`: prefix for relative paths (default: the current directory).
    pub prefix: PathBuf,
    /// `-c`: the config file; `None` uses [`EMBEDDED`].
    pub conf_file: Option<PathBuf>,
    /// `-g`: extra main-context directives.
    pub globals: Option<String>,
    /// `-r`: the directory the embedded config serves.
    pub root: Option<PathBuf>,
    /// `-l`: the address the embedded config listens on
    /// ([`EMBEDDED_LISTEN`] when `None`).
    pub listen: Option<std::net::SocketAddr>,
    /// `-e`: error log path (`stderr` allowed), replacing `error_log`.
    pub error_log: Option<String>,
}

/// What a load produced besides the config: the source text for `-T`.
pub struct Loaded {
    /// The typed configuration.
    pub config: Config,
    /// (file name, contents) of every file read, for `-T`.
    pub sources: Vec<(String, String)>,
}

/// The path shown in messages for the configuration in use.
pub fn conf_name(opts: &LoadOptions) -> String {
    match &opts.conf_file {
        Some(p) => p.display().to_string(),
        None => "<embedded>/porter.conf".to_string(),
    }
}

/// The directory the embedded configuration serves (`-r`, else the
/// prefix), made absolute.
pub fn embedded_root(opts: &LoadOptions) -> PathBuf {
    let root = opts.root.clone().unwrap_or_else(|| opts.prefix.clone());
    root.canonicalize().unwrap_or(root)
}

/// Reads, parses and builds the configuration.
pub fn load(opts: &LoadOptions) -> Result<Loaded, ConfError> {
    let conf_dir = match &opts.conf_file {
        Some(p) => p.parent().map(Path::to_path_buf).unwrap_or_default(),
        None => opts.prefix.join("conf"),
    };
    let mut parser = parser::Parser::new(conf_dir);
    let mut build = directives::Build::new(opts.prefix.clone());
    if let Some(g) = &opts.globals {
        let dirs = parser.parse_param(g)?;
        build.apply_globals(&dirs)?;
    }
    let (dirs, mut sources) = match &opts.conf_file {
        Some(p) => {
            let dirs = parser.parse_file(p)?;
            (dirs, Vec::new())
        }
        None => {
            let root = embedded_root(opts);
            let quoted = format!(
                "\"{}\"",
                root.display()
                    .to_string()
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
            );
            let listen = opts.listen.unwrap_or(EMBEDDED_LISTEN);
            let text = EMBEDDED
                .replace("@ROOT@", &quoted)
                .replace("@LISTEN@", &listen.to_string())
                .replace("@PORT@", &listen.port().to_string());
            let name = PathBuf::from("<embedded>/porter.conf");
            let dirs = parser.parse_str(&text, &name)?;
            (dirs, vec![(name.display().to_string(), text)])
        }
    };
    build.walk(&dirs)?;
    if let Some(e) = &opts.error_log {
        build.override_error_log(e).map_err(|m| ConfError {
            message: m,
            file: None,
            line: 0,
        })?;
    }
    for f in parser.files() {
        let text = parser.file_text(f).unwrap_or_default().to_string();
        sources.push((f.display().to_string(), text));
    }
    let files = parser.files().to_vec();
    let config = build.finish(files)?;
    Ok(Loaded { config, sources })
}
