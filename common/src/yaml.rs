//! YAML files as every configuration file of ours is read: a blank file
//! is the default value rather than a parse error, so an empty ConfigMap
//! key or a freshly created file means "nothing set".

use serde::de::DeserializeOwned;

/// `text` as a `T`; blank text is `T::default()`. The error carries the
/// YAML path, line and column.
pub fn from_str_or_default<T: DeserializeOwned + Default>(
    text: &str,
) -> Result<T, yaml_serde::Error> {
    if text.trim().is_empty() {
        return Ok(T::default());
    }
    yaml_serde::from_str(text)
}
