pub mod schema_check;
