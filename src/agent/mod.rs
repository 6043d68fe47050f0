//! Host-side session traits and the agent protocol profile.
