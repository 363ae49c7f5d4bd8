//! The prompt texts of the graph engine, written for gralkor (not copied from
//! Graphiti): each step's instructions live in a submodule, and the helpers here
//! render the parts every prompt shares.
//!
//! Prompts put caller data (episode text, previous episodes, descriptions) inside
//! XML-like tags so the model can tell instructions from material; the material is
//! never interpreted as instructions by the surrounding text.

pub(crate) mod extract;
pub(crate) mod resolve;

use std::fmt::Write as _;

/// Appends `<tag>\ncontent\n</tag>\n` to `out`.
pub(crate) fn tagged(out: &mut String, tag: &str, content: &str) {
    let _ = writeln!(out, "<{tag}>\n{}\n</{tag}>", content.trim_end());
}

/// Appends the caller's extra instructions as a closing section of a system prompt,
/// when there are any (blank instructions add nothing).
pub(crate) fn append_instructions(out: &mut String, instructions: Option<&str>) {
    if let Some(extra) = instructions.map(str::trim).filter(|s| !s.is_empty()) {
        out.push_str("\n# Additional instructions from the caller\n");
        out.push_str(extra);
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagged_wraps_trimmed_content_and_blank_instructions_add_nothing() {
        let mut out = String::new();
        tagged(&mut out, "EPISODE", "hello\n\n");
        assert_eq!(out, "<EPISODE>\nhello\n</EPISODE>\n");
        let mut sys = String::from("rules\n");
        append_instructions(&mut sys, Some("  \n"));
        append_instructions(&mut sys, None);
        assert_eq!(sys, "rules\n");
        append_instructions(&mut sys, Some(" Prefer full names. "));
        assert!(sys.ends_with("# Additional instructions from the caller\nPrefer full names.\n"));
    }
}
