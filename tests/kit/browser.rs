//! A headless Chromium driven over WebDriver (Debian's `chromium` and
//! `chromium-driver`), for the dashboard's browser tests.
//!
//! The client speaks the handful of WebDriver commands the tests need
//! (new session, navigate, find, click, type, execute, window size,
//! screenshot) as JSON over loopback HTTP; a full client crate would bring
//! far more than that.
//! Without the binaries the test fails with how to install them: it is
//! never skipped.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// How long a step may wait for the page: generous, it only bounds a
/// failure (the page is polled, not slept on).
const PATIENCE: Duration = Duration::from_secs(30);

/// A browser session; the driver is killed on drop.
pub struct Browser {
    driver: Child,
    base: String,
    session: String,
    client: reqwest::Client,
    // Where failure screenshots go.
    shots: PathBuf,
    _profile: tempfile::TempDir,
}

/// A page element, by its WebDriver id.
#[derive(Debug, Clone)]
pub struct Element(String);

const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

impl Browser {
    /// Starts chromedriver and a headless Chromium; failure screenshots go
    /// to `shots`.
    pub async fn start(shots: &Path) -> Browser {
        for binary in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                Path::new(binary).exists(),
                "{binary} is missing: install Debian's chromium and chromium-driver \
                 (`apt-get install chromium chromium-driver`; ./scripts/test does it as root)"
            );
        }
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let base = format!("http://127.0.0.1:{port}");
        let client = reqwest::Client::new();
        // The driver takes a moment to listen.
        let ready = Instant::now();
        loop {
            if let Ok(response) = client.get(format!("{base}/status")).send().await {
                if response.status().is_success() {
                    break;
                }
            }
            assert!(ready.elapsed() < PATIENCE, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let profile = tempfile::tempdir().expect("profile dir");
        // Flags from the machine notes: no background traffic (the network
        // is closed), no sandbox (tests run as root), a fresh profile.
        let args = vec![
            "--headless".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--window-size=1400,1000".into(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args}
        }}});
        let response: Value = client
            .post(format!("{base}/session"))
            .json(&capabilities)
            .send()
            .await
            .expect("new WebDriver session")
            .json()
            .await
            .expect("WebDriver JSON");
        let session = response["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no browser session: {response}"))
            .to_string();
        std::fs::create_dir_all(shots).expect("screenshot dir");
        Browser {
            driver,
            base,
            session,
            client,
            shots: shots.to_path_buf(),
            _profile: profile,
        }
    }

    async fn command(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}/session/{}{path}", self.base, self.session);
        let mut request = self.client.request(method, url);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response: Value = request
            .send()
            .await
            .expect("WebDriver request")
            .json()
            .await
            .expect("WebDriver JSON");
        response["value"].clone()
    }

    /// Opens `url`.
    pub async fn goto(&self, url: &str) {
        self.command(reqwest::Method::POST, "/url", Some(json!({ "url": url })))
            .await;
    }

    /// Runs `script` (a function body; `arguments` holds `args`) and
    /// returns its result.
    pub async fn eval(&self, script: &str, args: Vec<Value>) -> Value {
        self.command(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({ "script": script, "args": args })),
        )
        .await
    }

    /// The first element matching `css`, if any.
    pub async fn find(&self, css: &str) -> Option<Element> {
        let value = self
            .command(
                reqwest::Method::POST,
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        match value[ELEMENT_KEY].as_str() {
            Some(id) => Some(Element(id.to_string())),
            None if value["error"] == "no such element" => None,
            None => panic!("finding {css}: {value}"),
        }
    }

    /// Clicks `element`, as a person would: scrolled to the middle of the
    /// window first, and clicked once the page has drawn it there. (A page
    /// that draws only what is on screen, `content-visibility: auto`,
    /// moves things as it draws them: the click would land where the
    /// element was before.)
    pub async fn click(&self, element: &Element) {
        let reference = json!({ ELEMENT_KEY: element.0 });
        self.command(
            reqwest::Method::POST,
            "/execute/async",
            Some(json!({
                "script": "const [node, done] = arguments;\
                    node.scrollIntoView({block: 'center'});\
                    requestAnimationFrame(() => requestAnimationFrame(() => {\
                      node.scrollIntoView({block: 'center'}); done(); }));",
                "args": [reference],
            })),
        )
        .await;
        self.command(
            reqwest::Method::POST,
            &format!("/element/{}/click", element.0),
            Some(json!({})),
        )
        .await;
    }

    /// Types `text` into `element`.
    pub async fn type_into(&self, element: &Element, text: &str) {
        self.command(
            reqwest::Method::POST,
            &format!("/element/{}/value", element.0),
            Some(json!({ "text": text })),
        )
        .await;
    }

    /// Sizes the window so that the page's viewport is `width` × `height`
    /// CSS pixels (`window.innerWidth` and `innerHeight`), as on a phone
    /// of that width: the window is sized, measured, and sized again by
    /// what its frame takes.
    pub async fn set_viewport(&self, width: u32, height: u32) {
        let mut outer = (width, height);
        for _ in 0..3 {
            self.command(
                reqwest::Method::POST,
                "/window/rect",
                Some(json!({"width": outer.0, "height": outer.1})),
            )
            .await;
            let inner = self
                .eval("return [window.innerWidth, window.innerHeight];", vec![])
                .await;
            let got = (
                inner[0].as_u64().unwrap_or(0) as u32,
                inner[1].as_u64().unwrap_or(0) as u32,
            );
            if got == (width, height) {
                return;
            }
            outer = (
                (outer.0 + width).saturating_sub(got.0),
                (outer.1 + height).saturating_sub(got.1),
            );
        }
        let inner = self
            .eval("return [window.innerWidth, window.innerHeight];", vec![])
            .await;
        panic!("the viewport did not become {width}x{height}: it is {inner}");
    }

    /// Saves a screenshot as `name`.png in the screenshot directory.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let value = self
            .command(reqwest::Method::GET, "/screenshot", None)
            .await;
        let path = self.shots.join(format!("{name}.png"));
        if let Some(data) = value.as_str() {
            if let Ok(bytes) = decode_base64(data) {
                let _ = std::fs::write(&path, bytes);
            }
        }
        path
    }

    /// Polls `script` until it returns something truthy (not null, false,
    /// 0 or ""), and returns that; on timeout saves a screenshot named
    /// after `what` and fails saying what was awaited.
    pub async fn wait_for(&self, what: &str, script: &str) -> Value {
        let start = Instant::now();
        loop {
            let value = self.eval(script, Vec::new()).await;
            let truthy = !(value.is_null()
                || value == json!(false)
                || value == json!(0)
                || value == json!(""));
            if truthy {
                return value;
            }
            if start.elapsed() > PATIENCE {
                let name: String = what
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                    .collect();
                let shot = self.screenshot(&format!("failed-{name}")).await;
                panic!(
                    "timed out waiting for {what}; screenshot: {}",
                    shot.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // The driver quits its browser when the session ends; killed
        // first, it would leave Chromium running with nobody to stop it.
        // Blocking, with std only: drop may run outside the runtime.
        let _ = end_session(&self.base, &self.session);
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// `DELETE /session/ID` on the driver at `base`, waiting for its answer
/// (the browser is gone by then).
fn end_session(base: &str, session: &str) -> std::io::Result<()> {
    use std::io::{Read, Write};
    let address = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address)?;
    stream.set_read_timeout(Some(PATIENCE))?;
    write!(
        stream,
        "DELETE /session/{session} HTTP/1.1\r\nHost: {address}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    Ok(())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Standard base64 (screenshots), without a crate for one function.
fn decode_base64(text: &str) -> Result<Vec<u8>, ()> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut buffer = 0u32;
    let mut bits = 0;
    for byte in text.bytes() {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' | b'\n' | b'\r' => continue,
            _ => return Err(()),
        };
        buffer = (buffer << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
        }
    }
    Ok(out)
}
