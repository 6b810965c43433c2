//! The server's Prometheus text (`porter_metrics`), for tests that read
//! its counters: one parser for every test file.

use super::get;

/// The server's `/metrics`, parsed on demand.
pub struct Metrics(pub String);

impl Metrics {
    /// `GET /metrics` from the server on `port`.
    pub fn fetch(port: u16) -> Metrics {
        let r = get(port, "/metrics");
        assert_eq!(r.status, 200, "GET /metrics: {}", r.text());
        assert_eq!(r.header("content-type"), Some("text/plain; version=0.0.4"));
        Metrics(r.text())
    }

    /// Sum of the samples named `name` whose labels include `labels`.
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let mut found = None;
        for line in self.0.lines() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let (n, ls) = match series.split_once('{') {
                Some((n, rest)) => (n, parse_labels(rest.trim_end_matches('}'))),
                None => (series, Vec::new()),
            };
            if n != name
                || !labels
                    .iter()
                    .all(|(k, v)| ls.iter().any(|(a, b)| a == k && b == v))
            {
                continue;
            }
            if let Ok(x) = value.parse::<f64>() {
                *found.get_or_insert(0.0) += x;
            }
        }
        found
    }

    /// [`Metrics::get`], which must find the series.
    pub fn must(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels)
            .unwrap_or_else(|| panic!("metric {name}{labels:?} missing from /metrics:\n{}", self.0))
    }
}

fn parse_labels(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some((k, after)) = rest.split_once("=\"") {
        let mut v = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, e)) = chars.next() {
                        v.push(e);
                    }
                }
                '"' => {
                    end = i + 1;
                    break;
                }
                c => v.push(c),
            }
        }
        out.push((k.trim_start_matches(',').trim().to_string(), v));
        rest = &after[end..];
    }
    out
}
