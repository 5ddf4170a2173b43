//! HTTPS routes and handlers: AdmissionReview and ConversionReview in and out. No certificate logic.
