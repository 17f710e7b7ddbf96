//! A runtime's state as SQL: the rule of `domain::RuntimeSummary` written as conditions on a runtime and its last
//! operation, so a list filtered by state pages in the database. The `runtime_resource` integration test checks
//! both against each other on runtimes in every state.

use sea_orm::sea_query::{Alias, Condition, Expr, ExprTrait, Query, SelectStatement, SimpleExpr};
use sea_orm::{ColumnTrait, EntityName};

use super::entity::{operation, runtime};
use crate::domain::{OperationState, OperationType, RuntimeState};

/// Runtimes (joined with their last operation) in `state`.
pub(super) fn in_state(state: RuntimeState) -> Condition {
    if state == RuntimeState::Deleted {
        return Condition::all().add(runtime::Column::DeletedAt.is_not_null());
    }
    let live = Condition::all().add(runtime::Column::DeletedAt.is_null());
    let running = |types: &[OperationType]| {
        Condition::all()
            .add(last_operation_counts())
            // Active: queued, running, or its plan waiting for approval (`OperationState::is_active`).
            .add(
                operation::Column::State.is_in(
                    [OperationState::Pending, OperationState::InProgress, OperationState::AwaitingApproval]
                        .map(OperationState::as_str),
                ),
            )
            .add(operation::Column::OperationType.is_in(types.iter().map(|operation_type| operation_type.as_str())))
    };
    let state_condition = match state {
        RuntimeState::Provisioning => running(&[OperationType::Provision]),
        RuntimeState::Updating => {
            running(&[OperationType::Upgrade, OperationType::WakeUp, OperationType::RenewCertificates])
        }
        RuntimeState::Hibernating => running(&[OperationType::Hibernate]),
        RuntimeState::Deprovisioning => running(&[OperationType::Deprovision]),
        RuntimeState::Failed => Condition::any()
            .add(Condition::all().add(last_operation_counts()).add(last_operation_is(OperationState::Failed)))
            .add(Condition::all().add(settled()).add(Expr::exists(provisioning_succeeded()).not())),
        RuntimeState::Ready => Condition::any()
            .add(
                Condition::all()
                    .add(runtime::Column::Preview.eq(true))
                    .add(last_operation_is(OperationState::Succeeded)),
            )
            .add(settled_and_provisioned().add(runtime::Column::Hibernated.eq(false))),
        RuntimeState::Hibernated => settled_and_provisioned().add(runtime::Column::Hibernated.eq(true)),
        RuntimeState::Deleted => unreachable!("handled above"),
    };
    live.add(state_condition)
}

fn last_operation_is(state: OperationState) -> SimpleExpr {
    operation::Column::State.eq(state.as_str())
}

/// The last operation decides the state: it is no dry run, or the runtime is a preview (whose plan it is).
fn last_operation_counts() -> Condition {
    Condition::any().add(operation::Column::DryRun.eq(false)).add(runtime::Column::Preview.eq(true))
}

/// A live runtime that nothing changes: its last operation succeeded, or is a dry run that changes nothing.
fn settled() -> Condition {
    Condition::all()
        .add(runtime::Column::Preview.eq(false))
        .add(Condition::any().add(operation::Column::DryRun.eq(true)).add(last_operation_is(OperationState::Succeeded)))
}

fn settled_and_provisioned() -> Condition {
    settled().add(Expr::exists(provisioning_succeeded()))
}

/// A succeeded provisioning (no dry run) of the runtime: its cluster exists.
fn provisioning_succeeded() -> SelectStatement {
    let provisioning = Alias::new("provisioning");
    Query::select()
        .expr(Expr::val(1))
        .from_as(operation::Entity.table_ref(), provisioning.clone())
        .and_where(
            Expr::col((provisioning.clone(), operation::Column::RuntimeId))
                .equals((runtime::Entity, runtime::Column::Id)),
        )
        .and_where(
            Expr::col((provisioning.clone(), operation::Column::OperationType)).eq(OperationType::Provision.as_str()),
        )
        .and_where(Expr::col((provisioning.clone(), operation::Column::State)).eq(OperationState::Succeeded.as_str()))
        .and_where(Expr::col((provisioning, operation::Column::DryRun)).eq(false))
        .to_owned()
}
