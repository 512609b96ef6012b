//! `format_json` and `format_mime`, and the media-type sniffer they and the inputs share.

pub mod json;
pub mod mime;
pub mod sniff;
