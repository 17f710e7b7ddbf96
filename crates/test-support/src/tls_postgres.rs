//! A PostgreSQL of its own for one test, that accepts connections over TLS only, with a server certificate for
//! `localhost` from a throwaway CA: the real server, to prove the service verifies the database it talks to.
//! Runs Debian's PostgreSQL binaries (installed by `tools/postgres.sh`) as the `postgres` user in a temporary
//! folder, so tests must run as root (as CI does). Stops on drop.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::pki::server_certificates;

pub struct TlsPostgres {
    child: Child,
    folder: tempfile::TempDir,
    pub port: u16,
}

impl TlsPostgres {
    pub async fn start() -> TlsPostgres {
        let bin = newest_postgres_bin();
        let folder = tempfile::tempdir().expect("temporary folder");
        let data = folder.path().join("data");
        let certificates = server_certificates();
        std::fs::write(folder.path().join("ca.crt"), &certificates.ca).unwrap();
        std::fs::write(folder.path().join("other-ca.crt"), server_certificates().ca).unwrap();
        let server_crt = folder.path().join("server.crt");
        let server_key_path = folder.path().join("server.key");
        std::fs::write(&server_crt, &certificates.cert).unwrap();
        std::fs::write(&server_key_path, &certificates.key).unwrap();
        std::fs::set_permissions(&server_key_path, std::fs::Permissions::from_mode(0o600)).unwrap();
        // PostgreSQL refuses to run as root: the folder (ours) becomes the postgres user's.
        let (uid, gid) = postgres_user();
        for path in [folder.path(), &server_crt, &server_key_path] {
            std::os::unix::fs::chown(path, Some(uid), Some(gid)).expect("chown the test folder to postgres");
        }
        let initdb = as_postgres(&bin.join("initdb"))
            .args(["--auth=trust", "--username=postgres", "--no-sync", "-D"])
            .arg(&data)
            .stdout(Stdio::null())
            .status()
            .expect("run initdb");
        assert!(initdb.success(), "initdb failed ({initdb})");
        // TLS only: no plain `host` line.
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostssl all all ::1/128 trust\n",
        )
        .unwrap();
        let port = test_control_plane::free_port();
        let child = as_postgres(&bin.join("postgres"))
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-c", "listen_addresses=localhost", "-c", "ssl=on"])
            .arg("-c")
            .arg(format!("ssl_cert_file={}", server_crt.display()))
            .arg("-c")
            .arg(format!("ssl_key_file={}", server_key_path.display()))
            .arg("-c")
            .arg(format!("unix_socket_directories={}", folder.path().display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start postgres");
        let server = TlsPostgres { child, folder, port };
        for _ in 0..100 {
            let ready = Command::new(bin.join("pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-p", &port.to_string()])
                .status()
                .is_ok_and(|status| status.success());
            if ready {
                return server;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the TLS PostgreSQL did not start on port {port}");
    }

    /// The CA that signed the server's certificate.
    pub fn ca_file(&self) -> PathBuf {
        self.folder.path().join("ca.crt")
    }

    /// Another CA, which did not.
    pub fn other_ca_file(&self) -> PathBuf {
        self.folder.path().join("other-ca.crt")
    }
}

impl Drop for TlsPostgres {
    fn drop(&mut self) {
        // SIGTERM: PostgreSQL's smart shutdown.
        // SAFETY: kill(2) with the id of our own child and a valid signal number has no memory effects.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

fn newest_postgres_bin() -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL from Debian's packages (tools/postgres.sh installs it)")
        .filter_map(|entry| Some(entry.ok()?.path().join("bin")))
        .filter(|bin| bin.join("postgres").exists())
        .collect();
    versions
        .sort_by_key(|bin| bin.parent().and_then(Path::file_name).and_then(|name| name.to_str()?.parse::<u32>().ok()));
    versions.pop().expect("a PostgreSQL version in /usr/lib/postgresql")
}

fn postgres_user() -> (u32, u32) {
    let id = |flag: &str| {
        let output = Command::new("id").args([flag, "postgres"]).output().expect("run id");
        String::from_utf8_lossy(&output.stdout).trim().parse::<u32>().expect("the postgres user exists")
    };
    (id("-u"), id("-g"))
}

fn as_postgres(binary: &Path) -> Command {
    let mut command = Command::new("runuser");
    command.args(["-u", "postgres", "--"]).arg(binary);
    command
}
