//! `format_json` and `format_mime`, and the media-type sniffer they and the inputs share.

pub(crate) mod json;
pub(crate) mod mime;
pub(crate) mod sniff;
