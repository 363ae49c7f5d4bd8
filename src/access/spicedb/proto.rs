//! The few protobuf messages of SpiceDB's `authzed.api.v1` the authorizer sends and
//! reads, encoded and decoded by hand (field numbers from the published API).

use crate::access::model::{ObjectRef, ObjectType, Relation, Relationship, RelationshipFilter};
use crate::{Error, Result};

/// A message being written.
#[derive(Default)]
pub(super) struct Msg(Vec<u8>);

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

impl Msg {
    pub(super) fn new() -> Msg {
        Msg::default()
    }

    pub(super) fn bytes(self) -> Vec<u8> {
        self.0
    }

    fn len_field(mut self, field: u32, bytes: &[u8]) -> Msg {
        varint(&mut self.0, u64::from(field) << 3 | 2);
        varint(&mut self.0, bytes.len() as u64);
        self.0.extend_from_slice(bytes);
        self
    }

    /// A string field (empty strings are the default and not written).
    pub(super) fn string(self, field: u32, v: &str) -> Msg {
        if v.is_empty() {
            return self;
        }
        self.len_field(field, v.as_bytes())
    }

    /// An embedded message (always written: presence matters).
    pub(super) fn message(self, field: u32, m: Msg) -> Msg {
        let bytes = m.0;
        self.len_field(field, &bytes)
    }

    /// A varint field (enums, bools, integers); zero is not written.
    pub(super) fn uint(mut self, field: u32, v: u64) -> Msg {
        if v == 0 {
            return self;
        }
        varint(&mut self.0, u64::from(field) << 3);
        varint(&mut self.0, v);
        self
    }
}

/// One decoded field.
pub(super) enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn bad(what: &str) -> Error {
    Error::Protocol(format!("SpiceDB sent a malformed {what}"))
}

fn read_varint(buf: &[u8], at: &mut usize) -> Result<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*at).ok_or_else(|| bad("varint"))?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Ok(v);
        }
    }
    Err(bad("varint"))
}

/// The fields of a message, in order.
pub(super) fn fields(buf: &[u8]) -> Result<Vec<(u32, Field<'_>)>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let key = read_varint(buf, &mut at)?;
        let field = (key >> 3) as u32;
        match key & 7 {
            0 => out.push((field, Field::Varint(read_varint(buf, &mut at)?))),
            2 => {
                let len = read_varint(buf, &mut at)? as usize;
                let end = at.checked_add(len).filter(|e| *e <= buf.len());
                let end = end.ok_or_else(|| bad("length"))?;
                out.push((field, Field::Bytes(&buf[at..end])));
                at = end;
            }
            1 => at += 8,
            5 => at += 4,
            _ => return Err(bad("wire type")),
        }
    }
    Ok(out)
}

/// The first bytes field `n`.
pub(super) fn bytes_field<'a>(fs: &[(u32, Field<'a>)], n: u32) -> Option<&'a [u8]> {
    fs.iter().find_map(|(f, v)| match v {
        Field::Bytes(b) if *f == n => Some(*b),
        _ => None,
    })
}

/// The first varint field `n` (0 when absent).
pub(super) fn uint_field(fs: &[(u32, Field<'_>)], n: u32) -> u64 {
    fs.iter()
        .find_map(|(f, v)| match v {
            Field::Varint(x) if *f == n => Some(*x),
            _ => None,
        })
        .unwrap_or(0)
}

/// A string field `n` ("" when absent).
pub(super) fn string_field(fs: &[(u32, Field<'_>)], n: u32) -> Result<String> {
    match bytes_field(fs, n) {
        Some(b) => String::from_utf8(b.to_vec()).map_err(|_| bad("string")),
        None => Ok(String::new()),
    }
}

/// SpiceDB object ids allow `[a-zA-Z0-9/_|\-=+]`: every other byte (and `=`) is
/// written `=hh`, so any gralkor id maps to exactly one SpiceDB id and back.
pub(super) fn escape_id(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'_' | b'|' | b'-' | b'+') {
            out.push(b as char);
        } else {
            out.push_str(&format!("={b:02x}"));
        }
    }
    out
}

/// The inverse of [`escape_id`].
pub(super) fn unescape_id(id: &str) -> Result<String> {
    let bytes = id.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'=' {
            let hex = id.get(i + 1..i + 3).ok_or_else(|| bad("object id"))?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad("object id"))?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad("object id"))
}

pub(super) fn object(o: &ObjectRef) -> Msg {
    Msg::new()
        .string(1, o.kind.as_str())
        .string(2, &escape_id(&o.id))
}

pub(super) fn subject(o: &ObjectRef) -> Msg {
    Msg::new().message(1, object(o))
}

pub(super) fn relationship(r: &Relationship) -> Msg {
    Msg::new()
        .message(1, object(&r.resource))
        .string(2, r.relation.as_str())
        .message(3, subject(&r.subject))
}

/// `Consistency`: at least as fresh as `token`, or fully consistent without one
/// (what the authorizer asks for today).
pub(super) fn consistency(token: Option<&str>) -> Msg {
    match token {
        Some(t) => Msg::new().message(2, Msg::new().string(1, t)),
        None => Msg::new().uint(4, 1),
    }
}

pub(super) fn filter(f: &RelationshipFilter) -> Msg {
    let mut m = Msg::new().string(1, f.resource_type.as_str());
    if let Some(id) = &f.resource_id {
        m = m.string(2, &escape_id(id));
    }
    if let Some(rel) = f.relation {
        m = m.string(3, rel.as_str());
    }
    if let Some(s) = &f.subject {
        m = m.message(
            4,
            Msg::new()
                .string(1, s.kind.as_str())
                .string(2, &escape_id(&s.id)),
        );
    }
    m
}

fn decode_object(buf: &[u8]) -> Result<ObjectRef> {
    let fs = fields(buf)?;
    ObjectRef::new(
        ObjectType::parse(&string_field(&fs, 1)?)?,
        unescape_id(&string_field(&fs, 2)?)?,
    )
}

pub(super) fn decode_relationship(buf: &[u8]) -> Result<Relationship> {
    let fs = fields(buf)?;
    let resource = decode_object(bytes_field(&fs, 1).ok_or_else(|| bad("relationship"))?)?;
    let relation = Relation::parse(&string_field(&fs, 2)?)?;
    let sub = fields(bytes_field(&fs, 3).ok_or_else(|| bad("relationship"))?)?;
    let subject = decode_object(bytes_field(&sub, 1).ok_or_else(|| bad("subject"))?)?;
    Relationship::new(resource, relation, subject)
}

/// The `token` of the ZedToken in field `n` of a response.
pub(super) fn zed_token(buf: &[u8], n: u32) -> Result<Option<String>> {
    let fs = fields(buf)?;
    match bytes_field(&fs, n) {
        Some(t) => Ok(Some(string_field(&fields(t)?, 1)?).filter(|s| !s.is_empty())),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_escape_to_spicedbs_alphabet_and_back() {
        for id in ["personal/ada", "O'Hara = ✓", "a=b", "x y\\z", "===", "ü"] {
            let e = escape_id(id);
            assert!(
                e.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"/_|-+=".contains(&b)),
                "{e}"
            );
            assert_eq!(unescape_id(&e).unwrap(), id);
        }
        assert_ne!(escape_id("a=3d"), escape_id("a="));
    }

    #[test]
    fn messages_round_trip_through_the_decoder() {
        let r = Relationship::member("team x", &crate::access::Subject::person("ada").unwrap())
            .unwrap();
        let bytes = relationship(&r).bytes();
        assert_eq!(decode_relationship(&bytes).unwrap(), r);
        let big = Msg::new().uint(3, 300).string(1, "t").bytes();
        let fs = fields(&big).unwrap();
        assert_eq!(uint_field(&fs, 3), 300);
        assert_eq!(string_field(&fs, 1).unwrap(), "t");
        assert!(fields(&[0x0a, 0x05, 1]).is_err(), "a length past the end");
    }
}
