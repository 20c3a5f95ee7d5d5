//! TLS to PostgreSQL as a managed database needs it: `sslmode` and `sslrootcert` in
//! `DATABASE_URL`, checked against the test server (`PORTHOLE_TEST_DATABASE_URL`) with
//! certificates made here by `openssl`: a CA, and a server certificate it signs for the
//! name `localhost` only. The test turns TLS on in that server (`ALTER SYSTEM`, reload)
//! and off again at the end; it is a test binary of its own, so no other PostgreSQL test
//! runs meanwhile.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use porthole::bot::store::{Store, fresh_schema_url};
use serde_json::Value;

/// Runs `openssl` with `args` (separated by spaces) in `dir`, failing the test if it fails.
fn openssl(dir: &Path, args: &str) {
    let out = Command::new("openssl")
        .args(args.split_whitespace())
        .current_dir(dir)
        .output()
        .expect("openssl runs");
    assert!(out.status.success(), "openssl {args:?}: {out:?}");
}

/// A CA named `name` in `dir` (`name.crt`, `name.key`).
fn make_ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &format!(
            "req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=porthole-test-{name} \
             -keyout {name}.key -out {name}.crt"
        ),
    );
}

/// A server certificate for `localhost` only, signed by the CA `ca`.
fn make_server_cert(dir: &Path, ca: &str) {
    std::fs::write(dir.join("server.ext"), "subjectAltName=DNS:localhost\n").unwrap();
    openssl(
        dir,
        "req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout server.key -out server.csr",
    );
    openssl(
        dir,
        &format!(
            "x509 -req -in server.csr -CA {ca}.crt -CAkey {ca}.key -CAcreateserial -days 2 \
             -extfile server.ext -out server.crt"
        ),
    );
}

/// Runs `sql` through `store`'s console and returns the first row's first value.
async fn first_value(store: &Store, sql: &str) -> Value {
    let outcome = store
        .run_sql(sql, Vec::new(), 1, false, Duration::from_secs(10))
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    outcome.rows[0][0].clone()
}

/// A plain connection to the test server for what its console cannot do (`ALTER
/// SYSTEM` refuses to run inside the console's transaction).
async fn admin(base: &str) -> tokio_postgres::Client {
    let config: tokio_postgres::Config = base.parse().expect("PORTHOLE_TEST_DATABASE_URL");
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
}

/// The server's own data folder's owner: the key file must belong to it.
async fn server_owner(admin: &tokio_postgres::Client) -> u32 {
    use std::os::unix::fs::MetadataExt;
    let row = admin.query_one("SHOW data_directory", &[]).await.unwrap();
    let data: String = row.get(0);
    std::fs::metadata(data).unwrap().uid()
}

/// Hands the certificate files to the server's user (the key must be its own, 0600).
fn give_to_server(dir: &Path, owner: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    for file in ["server.crt", "server.key"] {
        let path = dir.join(file);
        let mode = if file.ends_with(".key") { 0o600 } else { 0o644 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        // SAFETY: geteuid only reads the process's user id.
        if unsafe { libc::geteuid() } != owner {
            std::os::unix::fs::chown(&path, Some(owner), None).unwrap();
        }
    }
}

/// `url` with its host replaced and `query` added.
fn with_tls(url: &str, host: &str, query: &str) -> String {
    let url = url.replacen("@127.0.0.1:", &format!("@{host}:"), 1);
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}{query}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sslmode_verify_full_connects_and_a_wrong_ca_or_host_is_refused_with_what_to_fix() {
    let _postgres = common::postgres_share().await;
    let Some(base) = common::test_database_url() else {
        return;
    };
    // `openssl` has no `--version` flag, so `has_program` cannot ask it.
    if !Command::new("openssl")
        .arg("version")
        .output()
        .is_ok_and(|out| out.status.success())
    {
        common::service_missing("the program `openssl`", "apt-get install openssl");
        return;
    }
    let dir: PathBuf =
        std::env::temp_dir().join(format!("porthole-tls-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    make_ca(&dir, "ca");
    make_ca(&dir, "other-ca");
    make_server_cert(&dir, "ca");

    let admin = admin(&base).await;
    give_to_server(&dir, server_owner(&admin).await);
    let crt = dir.join("server.crt").display().to_string();
    let key = dir.join("server.key").display().to_string();
    for sql in [
        format!("ALTER SYSTEM SET ssl_cert_file = '{crt}'"),
        format!("ALTER SYSTEM SET ssl_key_file = '{key}'"),
        "ALTER SYSTEM SET ssl = on".to_string(),
        "SELECT pg_reload_conf()".to_string(),
    ] {
        admin.batch_execute(&sql).await.unwrap();
    }
    // The reload is asynchronous: wait until new connections are offered TLS.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let ca = dir.join("ca.crt").display().to_string();
    let other_ca = dir.join("other-ca.crt").display().to_string();
    let outcome = async {
        // verify-full by the certificate's own name: connects, and the session is encrypted.
        let url = with_tls(
            &fresh_schema_url(&base),
            "localhost",
            &format!("sslmode=verify-full&sslrootcert={ca}"),
        );
        let store = Store::open(&url).map_err(|e| format!("verify-full: {e}"))?;
        let ssl = first_value(
            &store,
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
        )
        .await;
        if ssl != Value::Bool(true) {
            return Err(format!("verify-full connected without TLS: {ssl}"));
        }
        // A CA that did not sign the server's certificate: refused, naming sslrootcert.
        let url = with_tls(
            &base,
            "localhost",
            &format!("sslmode=verify-full&sslrootcert={other_ca}"),
        );
        match Store::open(&url) {
            Ok(_) => return Err("a wrong CA was accepted".into()),
            Err(e) if e.to_string().contains("sslrootcert") => {}
            Err(e) => return Err(format!("a wrong CA says: {e}")),
        }
        // A host the certificate does not name: refused under verify-full, with the way
        // out; verify-ca (the CA only) accepts it.
        let url = with_tls(
            &base,
            "127.0.0.1",
            &format!("sslmode=verify-full&sslrootcert={ca}"),
        );
        match Store::open(&url) {
            Ok(_) => return Err("a host the certificate does not name was accepted".into()),
            Err(e) if e.to_string().contains("verify-ca") => {}
            Err(e) => return Err(format!("a wrong host says: {e}")),
        }
        let url = with_tls(
            &fresh_schema_url(&base),
            "127.0.0.1",
            &format!("sslmode=verify-ca&sslrootcert={ca}"),
        );
        Store::open(&url).map_err(|e| format!("verify-ca: {e}"))?;
        Ok::<(), String>(())
    }
    .await;

    for sql in [
        "ALTER SYSTEM RESET ssl",
        "ALTER SYSTEM RESET ssl_cert_file",
        "ALTER SYSTEM RESET ssl_key_file",
        "SELECT pg_reload_conf()",
    ] {
        admin.batch_execute(sql).await.unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(problem) = outcome {
        panic!("{problem}");
    }
}

#[test]
fn an_unknown_sslmode_or_a_missing_ca_file_stops_start_up_naming_the_setting() {
    let url = "postgres://u:secret-pw@127.0.0.1:1/db";
    let error = Store::open(&format!("{url}?sslmode=verify-everything"))
        .err()
        .expect("an unknown sslmode is refused")
        .to_string();
    assert!(
        error.contains("sslmode=verify-everything") && error.contains("verify-full"),
        "{error}"
    );
    let error = Store::open(&format!(
        "{url}?sslmode=verify-full&sslrootcert=/no/such/ca.crt"
    ))
    .err()
    .expect("a missing CA file is refused")
    .to_string();
    assert!(error.contains("sslrootcert=/no/such/ca.crt"), "{error}");
    assert!(!error.contains("secret-pw"), "{error}");
}
