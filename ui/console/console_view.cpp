// SPDX-License-Identifier: GPL-3.0-or-later
// The run console; see console_view.h.
#include "console/console_view.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QScrollBar>
#include <QVBoxLayout>

#include "runs/console_model.h"

namespace spur::studio {

ConsoleView::ConsoleView(QString history_path, QWidget* parent)
    : QWidget(parent), model_(new app::ConsoleModel(std::move(history_path), this)), list_(new QListView(this)),
      ranks_(new QComboBox(this)), search_(new QLineEdit(this)), follow_(new QCheckBox(tr("Follow"), this)) {
  auto* layout = new QVBoxLayout(this);
  auto* bar = new QHBoxLayout;
  ranks_->setObjectName("ranks");
  ranks_->addItem(tr("All ranks"), QVariant());
  ranks_->addItem(tr("Launcher"), -1);
  search_->setObjectName("search");
  search_->setPlaceholderText(tr("Search"));
  search_->setClearButtonEnabled(true);
  follow_->setChecked(true);
  bar->addWidget(new QLabel(tr("Show"), this));
  bar->addWidget(ranks_);
  bar->addWidget(search_, 1);
  bar->addWidget(follow_);
  layout->addLayout(bar);
  list_->setModel(model_);
  list_->setUniformItemSizes(true);  // fast with tens of thousands of lines
  list_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  list_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  layout->addWidget(list_, 1);
  connect(ranks_, &QComboBox::currentIndexChanged, this, [this] { filter_changed(); });
  connect(search_, &QLineEdit::textChanged, this, [this] { filter_changed(); });
  connect(model_, &QAbstractItemModel::rowsInserted, this, [this](const QModelIndex&, int first, int last) {
    for (int row = first; row <= last; ++row) {
      const int rank = model_->data(model_->index(row), app::ConsoleModel::RankRole).toInt();
      if (rank >= 0 && known_ranks_.insert(rank).second) {
        int at = 2;
        while (at < ranks_->count() && ranks_->itemData(at).toInt() < rank) ++at;
        ranks_->insertItem(at, tr("Rank %1").arg(rank), rank);
      }
    }
    if (follow_->isChecked()) list_->scrollToBottom();
  });
}

void ConsoleView::set_run(qint64 run) {
  model_->set_run(run);
  refresh();
}

void ConsoleView::filter_changed() {
  const QVariant rank = ranks_->currentData();
  model_->set_rank(rank.isValid() ? std::optional<int>(rank.toInt()) : std::nullopt);
  model_->set_search(search_->text());
  refresh();
}

void ConsoleView::refresh() { model_->fetch_new(); }

}  // namespace spur::studio
