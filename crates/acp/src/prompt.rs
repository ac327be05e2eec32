//! A `session/prompt`'s content blocks as the text of a Pod prompt.

use agent_client_protocol::v1::schema::{ContentBlock, EmbeddedResourceResource};

/// A prompt block this server does not accept (it advertises neither image
/// nor audio support).
#[derive(Debug, thiserror::Error)]
#[error(
    "{0} content is not supported in prompts; send text, resource links or embedded text resources"
)]
pub struct UnsupportedBlock(&'static str);

/// Joins the blocks into one prompt: text as is, a resource link as a
/// reference the model can open, an embedded text resource inline with its
/// URI.
pub fn prompt_text(blocks: &[ContentBlock]) -> Result<String, UnsupportedBlock> {
    let mut parts = Vec::with_capacity(blocks.len());
    for block in blocks {
        parts.push(match block {
            ContentBlock::Text(text) => text.text.clone(),
            ContentBlock::ResourceLink(link) => format!("[@{}]({})", link.name, link.uri),
            ContentBlock::Resource(resource) => match &resource.resource {
                EmbeddedResourceResource::TextResourceContents(contents) => format!(
                    "<context uri=\"{}\">\n{}\n</context>",
                    contents.uri, contents.text
                ),
                _ => return Err(UnsupportedBlock("binary resource")),
            },
            ContentBlock::Image(_) => return Err(UnsupportedBlock("image")),
            ContentBlock::Audio(_) => return Err(UnsupportedBlock("audio")),
            _ => return Err(UnsupportedBlock("this kind of")),
        });
    }
    Ok(parts.join("\n"))
}
