//! `with_*` setters for configuration structs: each struct is `#[non_exhaustive]` (a field
//! added later breaks no host), so a host starts from `Default` and sets what it needs:
//! `CarrierConfig::default().with_port(0)`.

/// Implements, for each listed field, `fn with_FIELD(self, value) -> Self`.
macro_rules! with_setters {
    ($ty:ident { $($field:ident => $with:ident: $t:ty),* $(,)? }) => {
        impl $ty {
            $(
                #[doc = concat!("Sets [`", stringify!($field), "`](Self::", stringify!($field), ").")]
                #[must_use]
                pub fn $with(mut self, $field: $t) -> Self {
                    self.$field = $field;
                    self
                }
            )*
        }
    };
}

pub(crate) use with_setters;
