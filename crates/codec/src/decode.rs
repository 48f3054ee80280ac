//! Placeholder: the streaming decoder is being written.
