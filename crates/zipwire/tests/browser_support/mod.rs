//! The browser test's parts: the site, its origin (with a WebSocket echo), headless
//! Chromium, the proxy under test and a PNG reader for the screenshot.

pub mod chromium;
pub mod origin;
pub mod page;
pub mod png;
pub mod proxy;
