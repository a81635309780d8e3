// The undoable edits of a TopologyModel. Each command calls the model's
// setters; the model itself knows nothing of undo. A drag pushes one
// MoveHostCommand per mouse move and they merge into one step (same host,
// same drag).
#pragma once

#include <QUndoCommand>
#include <functional>

#include "cluster/topology_model.h"

class QUndoStack;

namespace baton::ui {

class AddHostCommand : public QUndoCommand {
 public:
  AddHostCommand(TopologyModel& model, TopologyHost host, QUndoCommand* parent = nullptr);
  void redo() override;
  void undo() override;
  int host_id() const { return host_.id; }

 private:
  TopologyModel& model_;
  TopologyHost host_;
  int index_ = -1;
};

class RemoveHostCommand : public QUndoCommand {
 public:
  RemoveHostCommand(TopologyModel& model, int host_id, QUndoCommand* parent = nullptr);
  void redo() override;
  void undo() override;

 private:
  TopologyModel& model_;
  int id_;
  TopologyHost host_;
  int index_ = -1;
  bool removed_ = false;
};

// Any change to one host but its position: role, name, port, devices, a
// probe's answer. Stores the host before and after.
class EditHostCommand : public QUndoCommand {
 public:
  EditHostCommand(TopologyModel& model, TopologyHost before, TopologyHost after,
                  const QString& text, QUndoCommand* parent = nullptr);
  void redo() override;
  void undo() override;

 private:
  TopologyModel& model_;
  TopologyHost before_, after_;
};

class MoveHostCommand : public QUndoCommand {
 public:
  static constexpr int kId = 0x7401;
  // `drag_id` tells one drag from the next: only moves of the same drag
  // merge.
  MoveHostCommand(TopologyModel& model, int host_id, QPointF from, QPointF to, int drag_id,
                  QUndoCommand* parent = nullptr);
  void redo() override;
  void undo() override;
  int id() const override { return kId; }
  bool mergeWith(const QUndoCommand* other) override;

 private:
  TopologyModel& model_;
  int host_id_;
  QPointF from_, to_;
  int drag_id_;
};

class SetStrategyCommand : public QUndoCommand {
 public:
  SetStrategyCommand(TopologyModel& model, QString strategy, QString ps_mode,
                     QUndoCommand* parent = nullptr);
  void redo() override;
  void undo() override;

 private:
  TopologyModel& model_;
  QString before_, after_, before_mode_, after_mode_;
};

// The whole topology at once: open a file, import hosts, probe hosts.
class SetTopologyCommand : public QUndoCommand {
 public:
  SetTopologyCommand(TopologyModel& model, TopologyModel::State after, const QString& text,
                     QUndoCommand* parent = nullptr);
  void redo() override;
  void undo() override;

 private:
  TopologyModel& model_;
  TopologyModel::State before_, after_;
};

// Pushes an EditHostCommand for `edit` applied to a copy of the host; does
// nothing when the host is absent or the edit changes nothing.
void push_host_edit(QUndoStack& stack, TopologyModel& model, int host_id, const QString& text,
                    const std::function<void(TopologyHost&)>& edit);

}  // namespace baton::ui
