//! Placeholder: stateful levels 4-9 are being written.
