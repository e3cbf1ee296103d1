//! `ssl.principal.mapping.rules`: Kafka's SslPrincipalMapper, which turns a client certificate's
//! subject DN into the principal's name ("CN=alice,OU=eng,O=corp" -> "alice").
//!
//! The rules are Kafka's text: a comma-separated list of `DEFAULT` (the DN as it is) and
//! `RULE:pattern/replacement/` with an optional `L` or `U` (lower or upper case the result),
//! tried in order; the first rule whose pattern matches the whole DN names the principal. Split
//! and parsed with Kafka's own two expressions, so the same text gives the same rules (and the
//! same refusals). A replacement's `$n` is a group of the pattern as in Java's
//! `String.replaceAll` (a number past the groups is cut to fewer digits, then kept as literal
//! text, as Kafka does); `\x` is a literal x. The patterns are the `regex` crate's syntax (RE2's
//! family: no backreferences or lookaround, `\w` and `\d` Unicode-aware), which covers the rules
//! Kafka's documentation shows; a pattern it cannot compile is refused at startup.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use regex::{Captures, Regex};

/// Kafka's RULE_PATTERN: group 1 DEFAULT, 2 the pattern, 4 the replacement, 6 the case.
const RULE: &str = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)";

#[derive(Debug)]
enum Rule {
    Default,
    /// `whole`: the pattern anchored at both ends (Java's Matcher.matches()).
    Map {
        pattern: Regex,
        whole: Regex,
        source: String,
        replacement: String,
        case: Option<char>,
    },
}

/// The parsed rules of one listener.
#[derive(Debug)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
}

impl PrincipalMapper {
    /// Kafka's splitting and parsing; Err names the rule it cannot take.
    pub fn parse(text: &str) -> Result<Self, String> {
        let splitter = Regex::new(&format!(r"\s*({RULE})\s*(,\s*|$)")).expect("constant regex");
        let parser = Regex::new(&format!("^(?:{RULE})")).expect("constant regex");
        let mut rules = Vec::new();
        for split in splitter.captures_iter(text.trim()) {
            let rule = split.get(1).map_or("", |m| m.as_str());
            let parsed = parser.captures(rule).expect("(.*?) matches any text");
            let end = parsed.get(0).map_or(0, |m| m.end());
            if end != rule.len() {
                return Err(format!(
                    "invalid rule `{rule}`, unmatched substring: `{}`",
                    &rule[end..]
                ));
            }
            if parsed.get(1).is_some() {
                rules.push(Rule::Default);
            } else if let Some(source) = parsed.get(2) {
                let source = source.as_str().to_string();
                let compile =
                    |text: &str| Regex::new(text).map_err(|e| format!("rule `{rule}`: {e}"));
                let (pattern, whole) = (compile(&source)?, compile(&format!(r"^(?:{source})\z"))?);
                let replacement = parsed.get(4).map_or("", |m| m.as_str()).to_string();
                let case = parsed.get(6).and_then(|m| m.as_str().chars().next());
                rules.push(Rule::Map {
                    pattern,
                    whole,
                    source,
                    replacement,
                    case,
                });
            } // an empty rule is ignored
        }
        Ok(PrincipalMapper { rules })
    }

    /// The principal's name for `dn` (Err: no rule applies, or a replacement names no group).
    pub fn name(&self, dn: &str) -> Result<String, String> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Ok(dn.to_string()),
                Rule::Map {
                    pattern,
                    whole,
                    replacement,
                    case,
                    ..
                } => {
                    if !whole.is_match(dn) {
                        continue;
                    }
                    let name = java_replace_all(pattern, dn, replacement)?;
                    return Ok(match case {
                        Some('L') => name.to_lowercase(),
                        Some('U') => name.to_uppercase(),
                        _ => name,
                    });
                }
            }
        }
        Err(format!(
            "no rule of ssl.principal.mapping.rules applies to {dn}"
        ))
    }

    /// Kafka's SslPrincipalMapper.toString() of the rules ("[RULE:^CN=(.*?),.*$/$1/L, DEFAULT]").
    pub fn describe(&self) -> String {
        let rules: Vec<String> = self
            .rules
            .iter()
            .map(|rule| match rule {
                Rule::Default => "DEFAULT".to_string(),
                Rule::Map {
                    source,
                    replacement,
                    case,
                    ..
                } => {
                    let case = case.map_or(String::new(), |c| format!("/{c}"));
                    format!("RULE:{source}/{replacement}{case}")
                }
            })
            .collect();
        format!("[{}]", rules.join(", "))
    }
}

/// Java's String.replaceAll: every match replaced, and after a non-empty match the search goes
/// on from its end, where an empty match counts too ("CN=a".replaceAll(".*", "x") is "xx"; the
/// regex crate's own replace_all skips that empty match).
fn java_replace_all(pattern: &Regex, text: &str, replacement: &str) -> Result<String, String> {
    let mut out = String::new();
    let (mut copied, mut from) = (0, 0);
    while from <= text.len() {
        let Some(caps) = pattern.captures_at(text, from) else {
            break;
        };
        let found = caps.get(0).expect("group 0 is the match");
        out.push_str(&text[copied..found.start()]);
        out.push_str(&java_replacement(replacement, &caps)?);
        copied = found.end();
        from = match text[found.end()..].chars().next() {
            _ if !found.is_empty() => found.end(),
            Some(c) => found.end() + c.len_utf8(),
            None => text.len() + 1,
        };
    }
    out.push_str(&text[copied..]);
    Ok(out)
}

/// Java's Matcher.appendReplacement for one match: `$n` (the longest number of at most the
/// groups there are, after Kafka's escapeLiteralBackReferences), `${name}`, `\x` literal.
fn java_replacement(template: &str, caps: &Captures) -> Result<String, String> {
    let groups = caps.len() - 1;
    let chars: Vec<char> = template.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => {
                let escaped = chars
                    .get(i + 1)
                    .ok_or("character to be escaped is missing")?;
                out.push(*escaped);
                i += 2;
            }
            '$' => {
                let Some(&next) = chars.get(i + 1) else {
                    return Err("illegal group reference: group index is missing".into());
                };
                if next == '{' {
                    let close = chars[i + 2..]
                        .iter()
                        .position(|&c| c == '}')
                        .ok_or("named group is missing trailing '}'")?;
                    let name: String = chars[i + 2..i + 2 + close].iter().collect();
                    let group = caps
                        .name(&name)
                        .ok_or_else(|| format!("no group with name {{{name}}}"))?;
                    out.push_str(group.as_str());
                    i += close + 3;
                    continue;
                }
                let Some(first) = next.to_digit(10) else {
                    return Err("illegal group reference".into());
                };
                // The longest number of at most `groups` (Java); a reference past the groups
                // even at one digit is literal text (Kafka's escapeLiteralBackReferences), but
                // without groups Kafka leaves it to Java, which refuses it.
                let mut digits = 1;
                let mut number = first as usize;
                while let Some(d) = chars.get(i + 1 + digits).and_then(|c| c.to_digit(10)) {
                    let longer = number * 10 + d as usize;
                    if longer > groups {
                        break;
                    }
                    number = longer;
                    digits += 1;
                }
                if number > groups {
                    if groups == 0 {
                        return Err(format!("no group {number}"));
                    }
                    out.push('$');
                    i += 1;
                    continue;
                }
                out.push_str(caps.get(number).map_or("", |m| m.as_str()));
                i += 1 + digits;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
}

/// `ssl.principal.mapping.rules` for Python: the startup check of the setting and the tests.
#[pyclass(frozen, name = "SslPrincipalMapper", module = "corral._core")]
pub struct PySslPrincipalMapper {
    mapper: PrincipalMapper,
}

#[pymethods]
impl PySslPrincipalMapper {
    #[new]
    fn new(rules: &str) -> PyResult<Self> {
        let mapper = PrincipalMapper::parse(rules).map_err(PyValueError::new_err)?;
        Ok(PySslPrincipalMapper { mapper })
    }

    /// The principal's name for a subject DN (ValueError: no rule applies).
    fn name(&self, dn: &str) -> PyResult<String> {
        self.mapper.name(dn).map_err(PyValueError::new_err)
    }

    fn __repr__(&self) -> String {
        format!("SslPrincipalMapper(rules = {})", self.mapper.describe())
    }
}
