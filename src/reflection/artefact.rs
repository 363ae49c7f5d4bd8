//! The artefact id: a v5-shaped UUID over SHA-256 of the invocation's identity.

use sha2::{Digest, Sha256};
use uuid::Uuid;

/// The id of the artefact a Reflection produces for one invocation, bit-compatible
/// with the original implementation:
///
/// 1. `identity` = `"<bytes>:<value>"` for each of the operator id, the invocation id
///    and the Reflection name, concatenated (the length prefix removes boundary
///    ambiguity; lengths are in bytes of UTF-8);
/// 2. `h = SHA-256(identity)`; its first 16 bytes are read big-endian as fields of
///    32, 16, 16, 16 and 48 bits;
/// 3. the third field gets version nibble 5 (`& 0x0FFF | 0x5000`), the fourth the RFC
///    variant (`& 0x3FFF | 0x8000`);
/// 4. formatted as lowercase `8-4-4-4-12` hex.
///
/// This is *shaped* like a UUIDv5 but is not the SHA-1 namespace construction. The
/// same id is the uuid of the artefact's episode, so a resubmitted invocation
/// converges on one episode.
///
/// ```
/// use gralkor::reflection::artefact_id;
///
/// assert_eq!(
///     artefact_id("operator-42", "release-2026-09-02", "release-review"),
///     "2321bdd4-3649-5383-a2c9-a80396631750"
/// );
/// ```
pub fn artefact_id(operator_id: &str, invocation_id: &str, reflection: &str) -> String {
    artefact_uuid(operator_id, invocation_id, reflection).to_string()
}

/// [`artefact_id`] as a [`Uuid`].
pub fn artefact_uuid(operator_id: &str, invocation_id: &str, reflection: &str) -> Uuid {
    let mut hasher = Sha256::new();
    for v in [operator_id, invocation_id, reflection] {
        hasher.update(format!("{}:", v.len()).as_bytes());
        hasher.update(v.as_bytes());
    }
    let h = hasher.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&h[..16]);
    // Field 3 is bytes 6..8, field 4 bytes 8..10, big-endian.
    bytes[6] = (bytes[6] & 0x0F) | 0x50;
    bytes[8] = (bytes[8] & 0x3F) | 0x80;
    Uuid::from_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values computed independently with Python's hashlib:
    ///
    /// ```text
    /// import hashlib
    /// def aid(op, inv, name):
    ///     ident = b''.join(f"{len(v.encode())}:".encode() + v.encode() for v in [op, inv, name])
    ///     h = hashlib.sha256(ident).digest()[:16]
    ///     p1, p2, p3, p4, p5 = (int.from_bytes(h[a:b], 'big') for a, b in
    ///                           [(0, 4), (4, 6), (6, 8), (8, 10), (10, 16)])
    ///     p3 = (p3 & 0x0FFF) | 0x5000; p4 = (p4 & 0x3FFF) | 0x8000
    ///     return f"{p1:08x}-{p2:04x}-{p3:04x}-{p4:04x}-{p5:012x}"
    /// ```
    #[test]
    fn artefact_ids_match_values_computed_independently() {
        assert_eq!(
            artefact_id("operator-42", "release-2026-09-02", "release-review"),
            "2321bdd4-3649-5383-a2c9-a80396631750"
        );
        assert_eq!(
            artefact_id("ada", "inv-1", "generalisations"),
            "f87d62c4-5a72-5f07-b7bd-96cef33c372d"
        );
        // Lengths are counted in bytes, not characters.
        assert_eq!(
            artefact_id("é", "ü:1", "erl"),
            "d2cc4d7e-10b2-5a84-bd05-863f49199d18"
        );
    }

    #[test]
    fn the_length_prefix_removes_boundary_ambiguity() {
        assert_eq!(
            artefact_id("a", "b:1", "c"),
            "ae2c7471-fb0a-5b10-864a-cea2bdd68e84"
        );
        assert_eq!(
            artefact_id("a", "b", "1:c"),
            "23aaa58b-6550-592a-9394-5b5f2a00a8b1"
        );
        let u = artefact_uuid("a", "b", "c");
        assert_eq!(u.get_version_num(), 5);
        assert_eq!(u.get_variant(), uuid::Variant::RFC4122);
    }
}
