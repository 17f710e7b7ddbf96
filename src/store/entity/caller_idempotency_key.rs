use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "caller_idempotency_key")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub caller: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub key: String,
    pub request_fingerprint: String,
    pub runtime_id: Uuid,
    pub operation_id: Uuid,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
