//! [`settings_group!`]: a group of location settings nested in
//! `LocSettings` (`fastcgi`, `proxy_cache`, `fastcgi_cache`): one level's
//! builder (each field set or not) and the merged settings, with the
//! field-by-field inheritance and NGINX's defaults the location settings
//! themselves have.

/// Declares `$builder` (every field an `Option`) and `$settings` (merged),
/// with `inherit` (take each unset field from the outer level) and
/// `finish` (the default for what is still unset).
macro_rules! settings_group {
    (
        $(#[$bdoc:meta])* $builder:ident => $(#[$sdoc:meta])* $settings:ident;
        $($(#[$doc:meta])* $field:ident : $ty:ty = $default:expr;)*
    ) => {
        $(#[$bdoc])*
        #[derive(Clone, Default, Debug)]
        pub struct $builder {
            $($(#[$doc])* pub $field: Option<$ty>,)*
        }

        $(#[$sdoc])*
        #[derive(Clone, Debug)]
        pub struct $settings {
            $($(#[$doc])* pub $field: $ty,)*
        }

        impl $builder {
            /// Takes from `parent` every setting this level did not set.
            pub fn inherit(&mut self, parent: &$builder) {
                $(if self.$field.is_none() { self.$field = parent.$field.clone(); })*
            }

            /// Fills NGINX's defaults into what is still unset.
            pub fn finish(&self) -> $settings {
                $settings {
                    $($field: match &self.$field { Some(v) => v.clone(), None => $default },)*
                }
            }
        }
    };
}

pub(crate) use settings_group;
