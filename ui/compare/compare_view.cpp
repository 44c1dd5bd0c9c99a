// SPDX-License-Identifier: GPL-3.0-or-later
// The compare view; see compare_view.h.
#include "compare/compare_view.h"

#include <QBrush>
#include <QCheckBox>
#include <QColor>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QIdentityProxyModel>
#include <QLabel>
#include <QMenu>
#include <QSettings>
#include <QTableView>
#include <QVBoxLayout>

namespace spur::studio {
namespace {

// Colours metric cells by their verdict against the baseline (app/ has no GUI types).
class VerdictColours : public QIdentityProxyModel {
 public:
  using QIdentityProxyModel::QIdentityProxyModel;
  QVariant data(const QModelIndex& index, int role) const override {
    if (role == Qt::ForegroundRole) {
      const int verdict = QIdentityProxyModel::data(index, app::CompareModel::VerdictRole).toInt();
      if (verdict > 0) return QBrush(QColor(0x1b, 0x87, 0x3f));
      if (verdict < 0) return QBrush(QColor(0xc6, 0x28, 0x28));
    }
    return QIdentityProxyModel::data(index, role);
  }
};

}  // namespace

CompareView::CompareView(QWidget* parent)
    : QWidget(parent),
      model_(new app::CompareModel(this)),
      table_(new QTableView(this)),
      differences_(new QCheckBox(tr("&Differences only"), this)),
      baseline_(new QComboBox(this)),
      empty_(new QLabel(tr("Select two or more runs on the left to compare them."), this)) {
  setObjectName("compare_view");
  auto* colours = new VerdictColours(this);
  colours->setSourceModel(model_);
  table_->setModel(colours);
  table_->setObjectName("compare_table");
  table_->setWordWrap(false);
  table_->setSelectionMode(QAbstractItemView::ContiguousSelection);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  table_->horizontalHeader()->setDefaultSectionSize(170);
  table_->horizontalHeader()->setMaximumSectionSize(420);
  table_->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->setContextMenuPolicy(Qt::CustomContextMenu);
  table_->verticalHeader()->setContextMenuPolicy(Qt::CustomContextMenu);
  connect(table_, &QWidget::customContextMenuRequested, this,
          [this](const QPoint& at) { context_menu(table_->viewport()->mapTo(this, at)); });
  connect(table_->verticalHeader(), &QWidget::customContextMenuRequested, this,
          [this](const QPoint& at) { context_menu(table_->verticalHeader()->mapTo(this, at)); });
  baseline_->setObjectName("baseline");
  baseline_->setToolTip(tr("The run the others are measured against: metric cells show their difference to it"));
  differences_->setToolTip(tr("Hide the rows whose values are the same in every run"));
  // "Differences only" is kept between sessions.
  differences_->setChecked(QSettings().value("compare/differences_only", false).toBool());
  model_->set_differences_only(differences_->isChecked());
  connect(differences_, &QCheckBox::toggled, this, [this](bool on) {
    QSettings().setValue("compare/differences_only", on);
    model_->set_differences_only(on);
    table_->resizeColumnsToContents();
  });
  connect(baseline_, &QComboBox::activated, this,
          [this](int index) { set_baseline(baseline_->itemData(index).toLongLong()); });
  // Columns follow their texts: a baseline adds deltas and " (baseline)" to the header ("0.9019 @ 936 (+0..." was
  // cut at the width the table had before), a direction or "differences only" changes rows.
  const auto fit = [this] { table_->resizeColumnsToContents(); };
  connect(model_, &QAbstractItemModel::modelReset, this, fit);
  connect(model_, &QAbstractItemModel::headerDataChanged, this, fit);
  connect(model_, &QAbstractItemModel::dataChanged, this, fit);
  empty_->setAlignment(Qt::AlignCenter);
  bar_ = new QWidget(this);
  auto* bar = new QHBoxLayout(bar_);
  bar->setContentsMargins(0, 0, 0, 0);
  bar->addWidget(differences_);
  bar->addSpacing(16);
  auto* label = new QLabel(tr("&Baseline:"), this);
  label->setBuddy(baseline_);
  bar->addWidget(label);
  bar->addWidget(baseline_, 1);
  bar->addStretch(1);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(bar_);
  layout->addWidget(empty_);
  layout->addWidget(table_, 1);
  set_snapshot({});
}

void CompareView::set_snapshot(const app::CompareSnapshot& snapshot) {
  model_->set_snapshot(snapshot);
  if (wanted_baseline_ != 0) model_->set_baseline(wanted_baseline_);
  baseline_->clear();
  baseline_->addItem(tr("none"), qint64(0));
  for (const auto& compared : snapshot.runs) {
    baseline_->addItem(QString("%1 %2").arg(compared.run.id).arg(QString::fromStdString(compared.run.name)),
                       static_cast<qint64>(compared.run.id));
  }
  baseline_->setCurrentIndex(std::max(0, baseline_->findData(model_->baseline())));
  table_->resizeColumnsToContents();
  const bool some = !snapshot.runs.empty();
  empty_->setText(snapshot.error.isEmpty() ? tr("Select two or more runs on the left to compare them.")
                                           : snapshot.error);
  empty_->setVisible(!some);
  table_->setVisible(some);
}

void CompareView::set_single_run(bool single) {
  bar_->setVisible(!single);
  if (single) {
    model_->set_differences_only(false);  // one run differs from nothing
    model_->set_baseline(0);
  }
}

void CompareView::set_baseline(qint64 run) {
  wanted_baseline_ = run;
  if (!model_->set_baseline(run)) return;
  baseline_->setCurrentIndex(std::max(0, baseline_->findData(run)));
}

void CompareView::context_menu(const QPoint& at) {
  const QPoint in_table = table_->viewport()->mapFrom(this, at);
  int row = table_->rowAt(in_table.y());
  if (row < 0) row = table_->verticalHeader()->logicalIndexAt(table_->verticalHeader()->mapFrom(this, at));
  if (row < 0) return;
  const QString field = model_->data(model_->index(row, 0), app::CompareModel::FieldRole).toString();
  if (!field.startsWith("metric/")) return;
  const QString metric = field.mid(7, field.lastIndexOf('/') - 7);
  QMenu menu(this);
  const auto now = model_->direction(metric);
  auto* lower = menu.addAction(tr("%1: lower is better").arg(metric));
  auto* higher = menu.addAction(tr("%1: higher is better").arg(metric));
  auto* neither = menu.addAction(tr("%1: neither (a counter or a schedule: no best, no colours)").arg(metric));
  const std::pair<QAction*, app::MetricDirection> choices[] = {{lower, app::MetricDirection::lower_is_better},
                                                               {higher, app::MetricDirection::higher_is_better},
                                                               {neither, app::MetricDirection::neither}};
  for (const auto& [action, direction] : choices) {
    action->setCheckable(true);
    action->setChecked(now == direction);
  }
  if (auto* chosen = menu.exec(mapToGlobal(at))) {
    for (const auto& [action, direction] : choices) {
      if (action == chosen) model_->set_direction(metric, direction);
    }
  }
}

}  // namespace spur::studio
