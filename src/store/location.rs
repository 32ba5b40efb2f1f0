//! A database location: a SQLite file's path, or a `postgres://` URL.

use std::path::Path;

#[cfg(not(feature = "postgres"))]
use super::StoreError;

/// Whether `location` names PostgreSQL: a `postgres://` or `postgresql://` URL.
#[must_use]
pub fn is_postgres_location(location: &Path) -> bool {
    location
        .to_str()
        .is_some_and(|s| s.starts_with("postgres://") || s.starts_with("postgresql://"))
}

/// `location` fit to print: a URL's password replaced by `***`; a path as it is.
#[must_use]
pub fn shown_location(location: &Path) -> String {
    let text = location.to_string_lossy();
    if !is_postgres_location(location) {
        return text.into_owned();
    }
    let Some((scheme, rest)) = text.split_once("://") else {
        return text.into_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => {
            let userinfo = &rest[..at];
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            format!("{scheme}://{user}:***{}", &rest[at..])
        }
        None => text.into_owned(),
    }
}

/// The error for a PostgreSQL location in a build without the `postgres` feature.
#[cfg(not(feature = "postgres"))]
pub(crate) fn postgres_unsupported(location: &Path) -> StoreError {
    StoreError::Unsupported(format!(
        "{}: a PostgreSQL location, but this build of rpr has no PostgreSQL support (build with the `postgres` feature)",
        shown_location(location)
    ))
}
