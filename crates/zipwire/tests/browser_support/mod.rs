//! The browser test's parts: the site, its origin (with a WebSocket echo), headless
//! Chromium, the proxy under test and a PNG reader for the screenshot.
//!
//! Each test binary that includes these modules uses only some of them.

#![allow(dead_code)]

pub mod chromium;
pub mod devtools;
pub mod origin;
pub mod page;
pub mod png;
pub mod proxy;
