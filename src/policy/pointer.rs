//! JSON Pointers (RFC 6901) for readback mappings: parsed once, resolved in a value, and
//! walked through a JSON Schema (`properties`, `items`, `prefixItems`) so that a pointer
//! no value of the schema can hold is refused when the policy is applied.

use std::fmt;

use serde_json::Value;

/// A parsed JSON Pointer: `""` is the whole value, `/a/0` the member `a`'s first item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pointer {
    tokens: Vec<String>,
}

impl Pointer {
    /// Parses `text` by RFC 6901: empty, or `/`-separated reference tokens, in which `~1`
    /// stands for `/` and `~0` for `~` (any other `~` is an error).
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        if text.is_empty() {
            return Ok(Self::root());
        }
        let Some(rest) = text.strip_prefix('/') else {
            return Err(format!(
                "`{text}` is not a JSON Pointer: it must be empty or start with `/`"
            ));
        };
        let tokens = rest
            .split('/')
            .map(|token| unescape(token).ok_or_else(|| bad_tilde(text)))
            .collect::<Result<_, _>>()?;
        Ok(Self { tokens })
    }

    /// The pointer of a readback placeholder (what follows `$`): a JSON Pointer when it
    /// starts with `/`, else the name of a top-level member, taken as written (`$a~b` is
    /// the member `a~b`, as before pointers).
    pub(crate) fn of_placeholder(text: &str) -> Result<Self, String> {
        if text.starts_with('/') {
            Self::parse(text)
        } else {
            Ok(Self::member(text))
        }
    }

    /// The empty pointer: the whole value.
    pub(crate) fn root() -> Self {
        Self { tokens: Vec::new() }
    }

    /// The pointer to the top-level member `name`.
    pub(crate) fn member(name: &str) -> Self {
        Self {
            tokens: vec![name.to_owned()],
        }
    }

    /// The pointer to the child `token` of this one.
    pub(crate) fn child(&self, token: &str) -> Self {
        let mut tokens = self.tokens.clone();
        tokens.push(token.to_owned());
        Self { tokens }
    }

    /// The reference tokens, unescaped.
    pub(crate) fn tokens(&self) -> &[String] {
        &self.tokens
    }

    /// Whether this is a pointer to a top-level member.
    pub(crate) fn is_top_level(&self) -> bool {
        self.tokens.len() == 1
    }

    /// The value this pointer names in `value`, else how many tokens resolved before the
    /// one that failed.
    pub(crate) fn resolve<'v>(&self, value: &'v Value) -> Result<&'v Value, usize> {
        let mut at = value;
        for (depth, token) in self.tokens.iter().enumerate() {
            let next = match at {
                Value::Object(map) => map.get(token),
                Value::Array(items) => index(token).and_then(|i| items.get(i)),
                _ => None,
            };
            at = next.ok_or(depth)?;
        }
        Ok(at)
    }

    /// The pointer made of the first `depth` tokens, as text.
    pub(crate) fn prefix(&self, depth: usize) -> String {
        let mut text = String::new();
        for token in &self.tokens[..depth.min(self.tokens.len())] {
            text.push('/');
            text.push_str(&escape(token));
        }
        text
    }
}

impl fmt::Display for Pointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.prefix(self.tokens.len()))
    }
}

fn bad_tilde(text: &str) -> String {
    format!(
        "`{text}` is not a JSON Pointer: a `~` must be followed by 0 or 1 (`~0` is `~`, `~1` is `/`)"
    )
}

/// `token` unescaped, or `None` when it holds a `~` not followed by 0 or 1.
fn unescape(token: &str) -> Option<String> {
    let mut out = String::with_capacity(token.len());
    let mut chars = token.chars();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.next() {
                Some('0') => out.push('~'),
                Some('1') => out.push('/'),
                _ => return None,
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// An array index by RFC 6901: `0`, or digits without a leading zero. `-` (the element
/// after the last) names no element that exists.
fn index(token: &str) -> Option<usize> {
    let digits = !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit());
    if !digits || (token.len() > 1 && token.starts_with('0')) {
        return None;
    }
    token.parse().ok()
}

/// Where a pointer leaves what a schema describes: the first token that fails, after the
/// tokens walked, and why.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Miss {
    /// The pointer to the last place the schema describes (`""` for the top).
    pub(crate) walked: String,
    /// The first token the schema has no place for.
    pub(crate) token: String,
    /// Why, for people.
    pub(crate) why: String,
}

impl fmt::Display for Miss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let under = if self.walked.is_empty() {
            "at the top".to_owned()
        } else {
            format!("under {}", self.walked)
        };
        write!(f, "{under}, `{}` fails: {}", self.token, self.why)
    }
}

/// What one step of the walk found.
enum Step<'s> {
    Into(&'s Value),
    /// The schema says nothing more precise below here (no `properties` or `items`, an
    /// `anyOf`, a `$ref`, other members admitted): not refused.
    Unchecked,
    Refused(String),
}

/// Walks `pointer` through `schema`: refused at the first token that no value of the
/// schema can hold (a member an object schema does not declare and does not admit, an
/// index of an array schema that is not one, an item past a closed tuple, any token below
/// a string, number, boolean or null). What the schema leaves open is not refused.
pub(crate) fn walk(schema: &Value, pointer: &Pointer) -> Result<(), Miss> {
    let mut at = schema;
    for (depth, token) in pointer.tokens().iter().enumerate() {
        match step(at, token) {
            Step::Into(next) => at = next,
            Step::Unchecked => return Ok(()),
            Step::Refused(why) => {
                return Err(Miss {
                    walked: pointer.prefix(depth),
                    token: token.clone(),
                    why,
                });
            }
        }
    }
    Ok(())
}

fn types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn step<'s>(schema: &'s Value, token: &str) -> Step<'s> {
    let Value::Object(members) = schema else {
        return match schema {
            Value::Bool(false) => Step::Refused("the schema admits no value here".into()),
            _ => Step::Unchecked,
        };
    };
    let types = types(schema);
    let object = members.contains_key("properties")
        || members.contains_key("additionalProperties")
        || (types.contains(&"object") && !types.contains(&"array"));
    let array = members.contains_key("items")
        || members.contains_key("prefixItems")
        || types.contains(&"array");
    if object {
        member_step(schema, token)
    } else if array {
        item_step(schema, token)
    } else if !types.is_empty() && types.iter().all(|t| SCALARS.contains(t)) {
        Step::Refused(format!(
            "the schema says the value there is {}, which has no members",
            types.join(" or ")
        ))
    } else {
        Step::Unchecked
    }
}

const SCALARS: [&str; 5] = ["string", "number", "integer", "boolean", "null"];

fn member_step<'s>(schema: &'s Value, token: &str) -> Step<'s> {
    let props = schema.get("properties").and_then(Value::as_object);
    if let Some(next) = props.and_then(|p| p.get(token)) {
        return Step::Into(next);
    }
    match schema.get("additionalProperties") {
        Some(extra @ Value::Object(_)) => Step::Into(extra),
        Some(Value::Bool(true)) => Step::Unchecked,
        // No `properties`: an object schema that names no member says nothing of them.
        None if props.is_none() => Step::Unchecked,
        // Absent or false: the declared members are the ones a value holds.
        _ => {
            let declared: Vec<&str> = props
                .map(|p| p.keys().map(String::as_str).collect())
                .unwrap_or_default();
            let declared = if declared.is_empty() {
                "none".to_owned()
            } else {
                declared.join(", ")
            };
            Step::Refused(format!(
                "the schema declares no member `{token}` there (it declares: {declared})"
            ))
        }
    }
}

fn item_step<'s>(schema: &'s Value, token: &str) -> Step<'s> {
    if token == "-" {
        return Step::Refused(
            "`-` names the item after the last one, which never exists".to_owned(),
        );
    }
    let Some(i) = index(token) else {
        return Step::Refused(format!(
            "the schema says the value there is an array, and `{token}` is not an array index \
             (0, 1, 2, … without leading zeros)"
        ));
    };
    // The tuple form: `prefixItems` (2020-12), or `items` as an array (draft-07) with
    // `additionalItems` for the items after it.
    let (tuple, rest) = match (schema.get("prefixItems"), schema.get("items")) {
        (Some(Value::Array(tuple)), rest) => (Some(tuple), rest),
        (None, Some(Value::Array(tuple))) => (Some(tuple), schema.get("additionalItems")),
        (_, rest) => (None, rest),
    };
    if let Some(next) = tuple.and_then(|t| t.get(i)) {
        return Step::Into(next);
    }
    match rest {
        Some(items @ Value::Object(_)) => Step::Into(items),
        Some(Value::Bool(false)) => Step::Refused(format!(
            "the schema admits at most {} items there",
            tuple.map_or(0, Vec::len)
        )),
        _ => Step::Unchecked,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tokens(text: &str) -> Vec<String> {
        Pointer::parse(text).unwrap().tokens().to_vec()
    }

    #[test]
    fn pointers_parse_by_rfc_6901() {
        assert_eq!(tokens(""), Vec::<String>::new());
        assert_eq!(tokens("/"), vec![""]);
        assert_eq!(tokens("/entities/0/name"), vec!["entities", "0", "name"]);
        assert_eq!(tokens("/a~1b"), vec!["a/b"]);
        assert_eq!(tokens("/m~0n"), vec!["m~n"]);
        // `~01` is `~` then `1`, not `/`: the escapes are undone left to right.
        assert_eq!(tokens("/~01"), vec!["~1"]);
        assert_eq!(tokens("/a//b"), vec!["a", "", "b"]);
        for bad in ["a", "entities/0", "/a~", "/a~2", "/~x"] {
            assert!(Pointer::parse(bad).is_err(), "{bad}");
        }
        let err = Pointer::parse("/a~2").unwrap_err();
        assert!(err.contains("`~0` is `~`, `~1` is `/`"), "{err}");
    }

    #[test]
    fn a_placeholder_without_a_slash_is_a_top_level_name_taken_as_written() {
        assert_eq!(
            Pointer::of_placeholder("path").unwrap(),
            Pointer::member("path")
        );
        assert_eq!(Pointer::of_placeholder("a~1b").unwrap().tokens(), ["a~1b"]);
        assert_eq!(Pointer::of_placeholder("/a~1b").unwrap().tokens(), ["a/b"]);
        assert_eq!(Pointer::member("a/b~c").to_string(), "/a~1b~0c");
    }

    #[test]
    fn pointers_resolve_members_and_indices_and_say_where_they_stop() {
        let doc = json!({"entities": [{"name": "n", "a/b": 1, "m~n": 2}], "": 3});
        let at = |p: &str| Pointer::parse(p).unwrap().resolve(&doc);
        assert_eq!(at(""), Ok(&doc));
        assert_eq!(at("/"), Ok(&json!(3)));
        assert_eq!(at("/entities/0/name"), Ok(&json!("n")));
        assert_eq!(at("/entities/0/a~1b"), Ok(&json!(1)));
        assert_eq!(at("/entities/0/m~0n"), Ok(&json!(2)));
        assert_eq!(at("/entities/1/name"), Err(1));
        assert_eq!(at("/entities/-"), Err(1));
        assert_eq!(at("/entities/00"), Err(1));
        assert_eq!(at("/entities/+0"), Err(1));
        assert_eq!(at("/entities/0/name/x"), Err(3));
        assert_eq!(at("/nope"), Err(0));
    }

    fn memory_input() -> Value {
        json!({"type": "object", "properties": {"entities": {"type": "array", "items": {
            "type": "object", "properties": {"name": {"type": "string"}, "entityType": {"type": "string"},
            "observations": {"type": "array", "items": {"type": "string"}}}}}}})
    }

    fn miss(schema: &Value, p: &str) -> Miss {
        walk(schema, &Pointer::parse(p).unwrap()).unwrap_err()
    }

    #[test]
    fn a_walk_follows_properties_and_items() {
        let schema = memory_input();
        for ok in [
            "",
            "/entities",
            "/entities/0",
            "/entities/12/name",
            "/entities/0/observations/3",
        ] {
            assert!(walk(&schema, &Pointer::parse(ok).unwrap()).is_ok(), "{ok}");
        }
        let m = miss(&schema, "/entities/0/nmae");
        assert_eq!(
            (m.walked.as_str(), m.token.as_str()),
            ("/entities/0", "nmae")
        );
        assert!(
            m.to_string().contains(
                "declares no member `nmae` there (it declares: name, entityType, observations)"
            ),
            "{m}"
        );
        let m = miss(&schema, "/entities/-/name");
        assert_eq!((m.walked.as_str(), m.token.as_str()), ("/entities", "-"));
        let m = miss(&schema, "/entities/first");
        assert!(m.why.contains("not an array index"), "{m}");
        let m = miss(&schema, "/entities/0/name/x");
        assert!(m.why.contains("is string, which has no members"), "{m}");
        let m = miss(&schema, "/entitie");
        assert_eq!(m.walked, "");
        assert!(
            m.to_string().starts_with("at the top, `entitie` fails"),
            "{m}"
        );
    }

    #[test]
    fn a_walk_follows_tuples_and_escaped_names() {
        let schema = json!({"type": "object", "properties": {
            "pair": {"type": "array", "prefixItems": [{"type": "object", "properties": {"a/b": {}}}, {}], "items": false},
            "old": {"type": "array", "items": [{"type": "string"}], "additionalItems": {"type": "object", "properties": {"k": {}}}},
            "m~n": {"type": "string"}}});
        let ok = |p: &str| walk(&schema, &Pointer::parse(p).unwrap()).is_ok();
        assert!(ok("/pair/0/a~1b"));
        assert!(ok("/pair/1/anything"));
        assert!(ok("/old/3/k"));
        assert!(ok("/m~0n"));
        assert!(!ok("/pair/0/a~1c"));
        assert!(miss(&schema, "/pair/2").why.contains("at most 2 items"));
        assert!(miss(&schema, "/old/0/x").why.contains("string"));
        assert!(!ok("/old/1/j"));
        assert!(!ok("/m~1n"));
    }

    #[test]
    fn what_a_schema_leaves_open_is_not_refused() {
        for schema in [
            json!({}),
            json!(true),
            json!({"type": "object"}),
            json!({"type": "object", "properties": {"a": {}}, "additionalProperties": true}),
            json!({"anyOf": [{"type": "string"}, {"type": "object"}]}),
            json!({"$ref": "#/definitions/x"}),
        ] {
            assert!(
                walk(&schema, &Pointer::parse("/b/0/c").unwrap()).is_ok(),
                "{schema}"
            );
        }
        let typed_extra = json!({"type": "object", "additionalProperties": {"type": "object", "properties": {"x": {}}}});
        assert!(walk(&typed_extra, &Pointer::parse("/any/x").unwrap()).is_ok());
        assert!(walk(&typed_extra, &Pointer::parse("/any/y").unwrap()).is_err());
        assert!(walk(&json!(false), &Pointer::parse("/a").unwrap()).is_err());
        let array = json!({"type": "array"});
        assert!(walk(&array, &Pointer::parse("/3/x").unwrap()).is_ok());
        assert!(walk(&array, &Pointer::parse("/b").unwrap()).is_err());
    }
}
