//! The front matter of agent definitions and skills: a `---` block of
//! `key: value` lines at the top of a Markdown file, then the body.
//!
//! The subset of YAML those files use, no more: plain, quoted and block
//! (`|`, `>`) scalars, lists written inline (`[a, b]`), comma-separated
//! or as `- item` lines, and nested maps (kept as text: pod reads none). Anything else is an error naming the line, so a
//! file pod cannot read is never half-understood.

/// One value of the front matter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    /// A scalar.
    Text(String),
    /// A list (`[a, b]` or `- item` lines).
    List(Vec<String>),
}

impl Value {
    /// Its items: a list's, or a scalar's comma-separated parts.
    pub fn items(&self) -> Vec<String> {
        match self {
            Value::List(items) => items.clone(),
            Value::Text(text) => text
                .split(',')
                .map(str::trim)
                .filter(|item| !item.is_empty())
                .map(String::from)
                .collect(),
        }
    }

    /// As text: a scalar, or a list's items joined.
    pub fn text(&self) -> String {
        match self {
            Value::Text(text) => text.clone(),
            Value::List(items) => items.join(", "),
        }
    }
}

/// A field: its key, value and the line it starts on (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Field {
    pub key: String,
    pub value: Value,
    pub line: usize,
}

/// A file split into its front matter and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Document {
    pub fields: Vec<Field>,
    pub body: String,
}

impl Document {
    /// The field `key`, if given.
    pub fn get(&self, key: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.key == key)
    }
}

/// Why front matter could not be read: the line and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Error {
    pub line: usize,
    pub message: String,
}

/// Splits `text` into front matter and body.
pub(crate) fn parse(text: &str) -> Result<Document, Error> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines: Vec<&str> = text.lines().collect();
    if lines.first().map(|l| l.trim_end()) != Some("---") {
        return Err(Error {
            line: 1,
            message: "the file does not start with front matter (a `---` line)".into(),
        });
    }
    let Some(end) = lines.iter().skip(1).position(|l| l.trim_end() == "---") else {
        return Err(Error {
            line: 1,
            message: "the front matter has no closing `---` line".into(),
        });
    };
    let end = end + 1;
    let fields = fields(&lines[1..end])?;
    let body = lines[end + 1..].join("\n");
    Ok(Document { fields, body })
}

/// The fields of the lines between the markers (the first is line 2).
fn fields(lines: &[&str]) -> Result<Vec<Field>, Error> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        let line_no = at + 2;
        let line = lines[at];
        at += 1;
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            return Err(Error {
                line: line_no,
                message: format!("an indented line outside a value: `{}`", line.trim()),
            });
        }
        let Some((key, rest)) = line.split_once(':') else {
            return Err(Error {
                line: line_no,
                message: format!("expected `key: value`, found `{}`", line.trim()),
            });
        };
        let key = key.trim().to_string();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(Error {
                line: line_no,
                message: format!("`{key}` is not a key"),
            });
        }
        let rest = rest.trim();
        // The value's own indented lines (a block scalar or a list).
        let start = at;
        while at < lines.len()
            && (lines[at].starts_with([' ', '\t']) || lines[at].trim().is_empty())
        {
            at += 1;
        }
        let block: Vec<&str> = lines[start..at].to_vec();
        let value = value(rest, &block, line_no)?;
        out.push(Field {
            key,
            value,
            line: line_no,
        });
    }
    Ok(out)
}

/// The value of a field: `rest` after the colon and its indented lines.
fn value(rest: &str, block: &[&str], line: usize) -> Result<Value, Error> {
    let block_text: Vec<&str> = block.iter().map(|l| l.trim()).collect();
    match rest {
        "|" | "|-" | "|+" | ">" | ">-" | ">+" => {
            let separator = if rest.starts_with('|') { "\n" } else { " " };
            let kept: Vec<&str> = block_text
                .iter()
                .copied()
                .skip_while(|l| l.is_empty())
                .collect();
            Ok(Value::Text(kept.join(separator).trim().to_string()))
        }
        "" => {
            let items: Vec<&str> = block_text
                .iter()
                .copied()
                .filter(|l| !l.is_empty())
                .collect();
            if items.is_empty() {
                return Ok(Value::Text(String::new()));
            }
            if !items[0].starts_with('-') {
                // A nested map (`metadata:` in a skill): kept as its text,
                // for fields pod does not read.
                return Ok(Value::Text(items.join("\n")));
            }
            let mut list = Vec::new();
            for (offset, item) in items.iter().enumerate() {
                let Some(item) = item.strip_prefix('-') else {
                    return Err(Error {
                        line: line + offset + 1,
                        message: format!("expected a `- item` line, found `{item}`"),
                    });
                };
                list.push(unquote(item.trim()));
            }
            Ok(Value::List(list))
        }
        _ if rest.starts_with('[') => {
            let Some(inner) = rest.strip_prefix('[').and_then(|r| r.strip_suffix(']')) else {
                return Err(Error {
                    line,
                    message: format!("an unclosed list: `{rest}`"),
                });
            };
            Ok(Value::List(
                inner
                    .split(',')
                    .map(|item| unquote(item.trim()))
                    .filter(|item| !item.is_empty())
                    .collect(),
            ))
        }
        _ => {
            // A plain scalar may go on over indented lines (folded).
            let mut text = unquote(rest);
            for more in block_text.iter().filter(|l| !l.is_empty()) {
                text.push(' ');
                text.push_str(more);
            }
            Ok(Value::Text(text))
        }
    }
}

/// `text` without the quotes around it.
fn unquote(text: &str) -> String {
    for quote in ['"', '\''] {
        if text.len() >= 2 && text.starts_with(quote) && text.ends_with(quote) {
            return text[1..text.len() - 1].to_string();
        }
    }
    text.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shapes_claude_code_files_use_parse() {
        let doc = parse(
            "---\nname: reviewer\ndescription: \"Reviews code: finds bugs\"\ntools: Read, Grep\n\
             model: sonnet\nlist:\n  - a\n  - 'b'\ninline: [x, \"y\"]\nlong: >\n  one\n  two\n---\n\
             You review.\n",
        )
        .unwrap();
        assert_eq!(doc.get("name").unwrap().value.text(), "reviewer");
        assert_eq!(
            doc.get("description").unwrap().value.text(),
            "Reviews code: finds bugs"
        );
        assert_eq!(doc.get("tools").unwrap().value.items(), ["Read", "Grep"]);
        assert_eq!(doc.get("list").unwrap().value.items(), ["a", "b"]);
        assert_eq!(doc.get("inline").unwrap().value.items(), ["x", "y"]);
        assert_eq!(doc.get("long").unwrap().value.text(), "one two");
        assert_eq!(doc.get("model").unwrap().line, 5);
        assert_eq!(doc.body, "You review.");
    }

    #[test]
    fn a_bad_file_names_the_line() {
        let err = parse("---\nname: a\nthis is not a field\n---\n").unwrap_err();
        assert_eq!(err.line, 3);
        assert!(err.message.contains("key: value"));
        assert_eq!(parse("no front matter").unwrap_err().line, 1);
        assert!(parse("---\nname: a\n")
            .unwrap_err()
            .message
            .contains("closing"));
        assert_eq!(parse("---\nl:\n  - a\n  b\n---\n").unwrap_err().line, 4);
        // A nested map, as a skill's `metadata`, is read as text.
        let doc = parse("---\nname: a\nmetadata:\n  author: me\n  version: \"1\"\n---\n").unwrap();
        assert_eq!(
            doc.get("metadata").unwrap().value.text(),
            "author: me\nversion: \"1\""
        );
    }
}
