//! Extractors whose rejections are API errors (`{"error": ...}` bodies), not axum's plain text.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::ApiError;
use super::error::Code;

/// A JSON body whose rejections are API errors (JSON bodies, 400/413/415/422).
pub(super) struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(v)) => Ok(Body(v)),
            Err(r) => Err(ApiError::from(r as JsonRejection)),
        }
    }
}

/// A JSON body that may be left out: a request with no body (no content type, no length) is
/// `T::default()`; one with a body is read as [`Body`] reads it.
pub(super) struct MaybeBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for MaybeBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
        let h = req.headers();
        let empty = h.get(CONTENT_LENGTH).is_some_and(|v| v == "0");
        if empty || (h.get(CONTENT_TYPE).is_none() && h.get(CONTENT_LENGTH).is_none()) {
            return Ok(MaybeBody(T::default()));
        }
        Body::<T>::from_request(req, state).await.map(|Body(v)| MaybeBody(v))
    }
}

/// A session id from the path (`%ff` is no id: 400).
pub(super) struct SessionId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for SessionId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        path_text(parts, state, "session id").await.map(SessionId)
    }
}

/// A pack's name from the path (400 as for a session id).
pub(super) struct PackName(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PackName {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        path_text(parts, state, "pack").await.map(PackName)
    }
}

/// A chat model's name from the path (400 as for a session id).
pub(crate) struct ModelName(pub String);

impl<S: Send + Sync> FromRequestParts<S> for ModelName {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        path_text(parts, state, "model").await.map(ModelName)
    }
}

/// The path's one parameter as text, or a 400 naming `what`.
async fn path_text<S: Send + Sync>(parts: &mut Parts, state: &S, what: &str) -> Result<String, ApiError> {
    match Path::<String>::from_request_parts(parts, state).await {
        Ok(Path(text)) => Ok(text),
        Err(r) => {
            Err(ApiError::new(Code::InvalidPath, format!("the {what} in the path is not valid: {}", r.body_text())))
        }
    }
}
