// Shared set-up for the studio tests: a StudioContext over the build tree,
// with run directories in a temporary directory.
#pragma once

#include <QTemporaryDir>

#include "common/studio_context.h"

namespace baton::ui {

inline StudioContext test_context(const QTemporaryDir& dir) {
  StudioContext ctx;
  ctx.plugin_dir = QStringLiteral(BATON_PLUGIN_DIR);
  ctx.baton_exe = QStringLiteral(BATON_CLI);
  ctx.examples_dir = QStringLiteral(BATON_SOURCE_DIR "/resources/examples");
  ctx.runs_dir = dir.filePath(QStringLiteral("runs"));
  ctx.history_db = dir.filePath(QStringLiteral("runs.db"));
  return ctx;
}

}  // namespace baton::ui
