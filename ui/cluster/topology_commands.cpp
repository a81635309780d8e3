#include "cluster/topology_commands.h"

#include <QUndoStack>

namespace baton::ui {

AddHostCommand::AddHostCommand(TopologyModel& model, TopologyHost host, QUndoCommand* parent)
    : QUndoCommand(parent), model_(model), host_(std::move(host)) {
  setText(QObject::tr("add host %1").arg(host_.name));
}

void AddHostCommand::redo() {
  // The first redo picks the id; a redo after an undo brings back the same.
  host_.id = model_.add_host(host_, index_);
  index_ = model_.host_index(host_.id);
}

void AddHostCommand::undo() { model_.remove_host(host_.id); }

RemoveHostCommand::RemoveHostCommand(TopologyModel& model, int host_id, QUndoCommand* parent)
    : QUndoCommand(parent), model_(model), id_(host_id) {
  const TopologyHost* h = model.host(host_id);
  setText(QObject::tr("remove host %1").arg(h != nullptr ? h->name : QString()));
}

void RemoveHostCommand::redo() {
  index_ = model_.host_index(id_);
  auto h = model_.remove_host(id_);
  removed_ = h.has_value();
  if (removed_) host_ = std::move(*h);
}

void RemoveHostCommand::undo() {
  if (removed_) model_.add_host(host_, index_);
}

EditHostCommand::EditHostCommand(TopologyModel& model, TopologyHost before, TopologyHost after,
                                 const QString& text, QUndoCommand* parent)
    : QUndoCommand(text, parent),
      model_(model),
      before_(std::move(before)),
      after_(std::move(after)) {}

void EditHostCommand::redo() { model_.replace_host(after_); }
void EditHostCommand::undo() { model_.replace_host(before_); }

MoveHostCommand::MoveHostCommand(TopologyModel& model, int host_id, QPointF from, QPointF to,
                                 int drag_id, QUndoCommand* parent)
    : QUndoCommand(parent),
      model_(model),
      host_id_(host_id),
      from_(from),
      to_(to),
      drag_id_(drag_id) {
  const TopologyHost* h = model.host(host_id);
  setText(QObject::tr("move %1").arg(h != nullptr ? h->name : QString()));
}

void MoveHostCommand::redo() { model_.move_host(host_id_, to_); }
void MoveHostCommand::undo() { model_.move_host(host_id_, from_); }

bool MoveHostCommand::mergeWith(const QUndoCommand* other) {
  const auto* o = static_cast<const MoveHostCommand*>(other);  // same id(): a MoveHostCommand
  if (o->host_id_ != host_id_ || o->drag_id_ != drag_id_) return false;
  to_ = o->to_;
  // A drag that ends where it began is no step at all.
  setObsolete(to_ == from_);
  return true;
}

SetStrategyCommand::SetStrategyCommand(TopologyModel& model, QString strategy, QString ps_mode,
                                       QUndoCommand* parent)
    : QUndoCommand(parent),
      model_(model),
      before_(model.strategy()),
      after_(std::move(strategy)),
      before_mode_(model.ps_mode()),
      after_mode_(std::move(ps_mode)) {
  setText(QObject::tr("strategy %1").arg(after_));
}

void SetStrategyCommand::redo() {
  model_.set_strategy(after_);
  model_.set_ps_mode(after_mode_);
}

void SetStrategyCommand::undo() {
  model_.set_strategy(before_);
  model_.set_ps_mode(before_mode_);
}

SetTopologyCommand::SetTopologyCommand(TopologyModel& model, TopologyModel::State after,
                                       const QString& text, QUndoCommand* parent)
    : QUndoCommand(text, parent), model_(model), before_(model.state()), after_(std::move(after)) {}

void SetTopologyCommand::redo() { model_.set_state(after_); }
void SetTopologyCommand::undo() { model_.set_state(before_); }

void push_host_edit(QUndoStack& stack, TopologyModel& model, int host_id, const QString& text,
                    const std::function<void(TopologyHost&)>& edit) {
  const TopologyHost* h = model.host(host_id);
  if (h == nullptr) return;
  TopologyHost after = *h;
  edit(after);
  if (after == *h) return;
  stack.push(new EditHostCommand(model, *h, std::move(after), text));
}

}  // namespace baton::ui
