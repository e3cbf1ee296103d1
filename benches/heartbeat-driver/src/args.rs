//! The drivers' command line: `--option value` pairs only (no flags without a value).

use std::collections::HashMap;
use std::str::FromStr;

pub struct Options(HashMap<String, String>);

impl Options {
    /// This process's arguments.
    pub fn from_env() -> Result<Options, String> {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let mut opts = HashMap::new();
        for pair in args.chunks(2) {
            match pair {
                [k, v] if k.starts_with("--") => {
                    opts.insert(k[2..].to_string(), v.clone());
                }
                _ => return Err(format!("expected --option value pairs, got {pair:?}")),
            }
        }
        Ok(Options(opts))
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// `--key`'s value parsed, or `default`; without a default the option is required.
    pub fn num<T: FromStr>(&self, key: &str, default: Option<T>) -> Result<T, String> {
        match self.get(key) {
            Some(v) => v.parse().map_err(|_| format!("--{key}: bad value {v}")),
            None => default.ok_or(format!("--{key} is required")),
        }
    }
}
